//! Hardening, round 2: what a security review of the fleet found, one test per finding, on
//! real agent processes and the real server. Each failed before its fix.

use crate::common;

use std::path::Path;

use common::Server;
use common::agents::*;
use serde_json::{Value, json};

/// Starts an enrolled agent again with a `/var/log` of its own holding every other spelling of
/// the agent's state a log path can take: a link, a bind mount of the state dir, a bind mount
/// of the credential file.
fn agent_with_disguised_state(s: &Server, state_dir: &Path, hostname: &str) -> Agent {
    let setup = "ln -s $STATE/agent.json /var/log/link.log; ln -s $STATE /var/log/linked-dir; \
         mkdir /var/log/bound; mount --bind $STATE /var/log/bound; \
         : > /var/log/credential.log; mount --bind $STATE/agent.json /var/log/credential.log; \
         echo 'an ordinary log line' > /var/log/ordinary.log";
    spawn_agent_with_logs(s, None, state_dir, hostname, setup)
}

fn tail(s: &Server, schemas: &std::collections::HashMap<String, Value>, agent_id: &str, path: &str) -> Value {
    let started = structured(
        s,
        schemas,
        "execute_instruction",
        json!({"definition": "log_tail", "params": {"path": path}, "agent_ids": [agent_id]}),
    );
    let execution_id = started["execution_id"].as_str().unwrap().to_string();
    let finished = wait_finished(s, schemas, &s.token, &execution_id);
    let rows = structured(s, schemas, "query_responses", json!({"execution_id": execution_id}));
    json!({"status": finished["agents"][0], "rows": rows})
}

/// HIGH 2: `log_tail` read the agent's own credential through its state dir. Now no spelling
/// of the state dir is read: the state dir itself, `..`, `/proc/self/root`, a link, a linked
/// directory, the state dir bind-mounted under /var/log and the credential bind-mounted as a
/// log (hard links are tested in the agent's unit tests: they need one filesystem).
#[test]
fn log_tail_never_reads_the_agents_own_state_however_it_is_spelled() {
    let s = common::start(FAST);
    let schemas = output_schemas(&s);
    let states = tempfile::tempdir().unwrap();
    let state_dir = states.path().join("tailed");
    let mut first = spawn_agent(&s, Some(&mint(&s, &["--uses", "1"])), &state_dir, Some("tailed"));
    let agent_id = online_by_hostname(&s, &schemas, 1)["tailed"].clone();
    first.kill();
    let credential: Value =
        serde_json::from_str(&std::fs::read_to_string(state_dir.join("agent.json")).unwrap()).unwrap();
    let secret = credential["credential"].as_str().unwrap().to_string();
    let agent = agent_with_disguised_state(&s, &state_dir, "tailed");
    wait_for_status(&s, &schemas, &agent_id, "online");

    let ordinary = tail(&s, &schemas, &agent_id, "/var/log/ordinary.log");
    assert_eq!(ordinary["status"]["status"], "succeeded", "{ordinary} {}", agent.log_text());
    assert!(ordinary.to_string().contains("an ordinary log line"), "{ordinary}");

    let state = state_dir.display().to_string();
    let spellings = [
        format!("{state}/agent.json"),
        format!("/var/log/../..{state}/agent.json"),
        format!("/proc/self/root{state}/agent.json"),
        "/var/log/link.log".to_string(),
        "/var/log/linked-dir/agent.json".to_string(),
        "/var/log/bound/agent.json".to_string(),
        "/var/log/credential.log".to_string(),
    ];
    for path in &spellings {
        let answer = tail(&s, &schemas, &agent_id, path);
        assert_eq!(answer["status"]["status"], "failed", "{path}: {answer}");
        let error = answer["status"]["error"].as_str().unwrap_or_default();
        assert!(error.contains("the agent's own state"), "{path}: {answer}");
        assert!(!answer.to_string().contains(&secret), "{path} leaked the credential: {answer}");
    }
    drop(agent);
}

/// HIGH 1: an agent quarantined while it was offline, with a change still due, ran the change
/// when it reconnected (the run went out right after the welcome, the quarantine only after
/// the agent's own state frame). Now the change is refused, never sent, and the agent is in
/// quarantine before any work; a diagnostic still runs.
#[test]
fn a_change_due_for_an_agent_quarantined_while_offline_never_runs() {
    let Fleet { s, schemas, states, mut agents, ids } = fleet_of_three(FAST);
    let supervised = s.token("admin", "supervised", "1h");
    let api = common::console::reviewer(&s, "reviewer");
    let agent_id = ids["fleet-a"].clone();
    agents[0].kill();
    wait_for_status(&s, &schemas, &agent_id, "offline");
    let started = structured(
        &s,
        &schemas,
        "execute_instruction",
        json!({"definition": "write_marker", "params": {"name": "due"}, "agent_ids": [agent_id]}),
    );
    assert_eq!(started["delivered_now"], 0, "{started}");
    let (quarantined, _) = approved(
        &s,
        &supervised,
        &api,
        "quarantine_device",
        json!({"agent_id": agent_id, "reason": "compromised", "mode": "soft"}),
    );
    assert_eq!(quarantined["told_now"], false, "{quarantined}");

    agents[0] = restart_agent(&s, states.path(), "fleet-a");
    let execution_id = started["execution_id"].as_str().unwrap();
    let finished = wait_finished(&s, &schemas, &s.token, execution_id);
    assert_eq!(finished["agents"][0]["status"], "refused", "{finished}");
    assert!(finished["agents"][0]["error"].as_str().unwrap().contains("quarantined"), "{finished}");
    let diagnostic =
        structured(&s, &schemas, "execute_instruction", json!({"definition": "os_facts", "agent_ids": [agent_id]}));
    let diagnostic = wait_finished(&s, &schemas, &s.token, diagnostic["execution_id"].as_str().unwrap());
    assert_eq!(diagnostic["agents"][0]["status"], "succeeded", "{diagnostic}");
    assert!(!states.path().join("fleet-a/work/due").exists(), "the change ran: {}", agents[0].log_text());
    let kept = std::fs::read_to_string(states.path().join("fleet-a/quarantine.json")).unwrap();
    assert!(kept.contains("\"quarantined\": true") || kept.contains("\"quarantined\":true"), "{kept}");
}

/// MEDIUM 8: a 15 KB batch of 100 page-sized calls produced a 123 MB answer. Now a batch's
/// answers stop growing at `--max-batch-answer-bytes` (the remaining requests are not run,
/// each told so), and one answer larger than `--max-answer-bytes` is replaced by an error
/// saying how to ask for less. Small caps here: a listing tool's page shrinks to fit them (a
/// page of 50 of a real agent's installed packages, every Debian host has hundreds, is more
/// than 4 KiB), and the answer of a tool that does not page (`discover_permissions`, every
/// tool the caller may call) is over them.
#[test]
fn batch_answers_and_single_answers_are_bounded() {
    let caps = ["--max-batch-answer-bytes", "8192", "--max-answer-bytes", "4096"];
    let s = common::start(&[FAST, &caps[..]].concat());
    let schemas = output_schemas(&s);
    let states = tempfile::tempdir().unwrap();
    let _agent = spawn_agent(&s, Some(&mint(&s, &["--uses", "1"])), &states.path().join("big"), Some("big"));
    let agent_id = online_by_hostname(&s, &schemas, 1)["big"].clone();
    let page = json!({"agent_id": agent_id, "table": "installed_software", "limit": 50});
    // The table arrives with the agent's first report (get_agent_details, which says so, is
    // itself over these caps).
    let deadline = std::time::Instant::now() + PATIENCE;
    let paged = loop {
        let answer = common::call_as(&s, &s.token, "get_agent_inventory", page.clone());
        if answer.json()["result"]["isError"] == false {
            break answer;
        }
        assert!(std::time::Instant::now() < deadline, "no packages reported: {}", answer.body);
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let body = paged.body.len();
    let paged = paged.json();
    let rows = paged["result"]["structuredContent"]["rows"].as_array().expect("a page, not a refusal").len();
    assert!(body <= 4096 && (1..50).contains(&rows), "{rows} rows in {body} bytes: the page fits the cap");
    assert!(paged["result"]["structuredContent"]["remaining"].as_u64().unwrap() > 0, "{paged}");

    let over_cap = |r: &Value| {
        r["result"]["isError"] == true
            && r["result"]["content"][0]["text"].as_str().is_some_and(|t| t.contains("more than the 4096"))
    };
    let single = common::call_as(&s, &s.token, "discover_permissions", json!({})).json();
    assert!(over_cap(&single), "every tool's permissions answered whole under a 4 KiB cap: {single}");
    let text = single["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("discover_permissions") && text.contains("ask for less"), "{text}");

    let call = |id: usize| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "discover_permissions", "arguments": {}}});
    let answer = s.post(&[], &Value::Array((0..100).map(call).collect()).to_string());
    assert_eq!(answer.status, 200, "{answer:?}");
    // The cap, one answer past it, and a short refusal for each of the (at most 100) others.
    let bound = 8192 + 4096 + 100 * 300;
    assert!(answer.body.len() < bound, "bounded: {} bytes", answer.body.len());
    let items = answer.json();
    let items = items.as_array().unwrap();
    assert_eq!(items.len(), 100, "every request is answered");
    let ran = items.iter().filter(|i| over_cap(i)).count();
    let not_run =
        items.iter().filter(|i| i["error"]["message"].as_str().is_some_and(|m| m.starts_with("not run"))).count();
    assert!(ran >= 1 && not_run >= 1 && ran + not_run == 100, "{ran} ran, {not_run} not run");
}

/// LOW 15: `list_pending_approvals` showed every principal's tickets to any reader. Now a
/// reader sees its own; a reviewer (whose roles grant deciding) sees all; asking for another
/// principal's reads as if there were none.
#[test]
fn a_reader_sees_its_own_tickets_and_a_reviewer_sees_all() {
    let s = common::start(&[]);
    let schemas = output_schemas(&s);
    s.cli(&["principal", "add", "olga", "--role", "Operator"]);
    let olga = s.token("olga", "operator", "1h");
    let ticket = |token: &str, key: &str| {
        let r = common::call_as(&s, token, "delete_tag", json!({"agent_id": "agt-00000000000000aa", "key": key}));
        approval_id(&r)
    };
    let admins = ticket(&s.token, "env");
    let olgas = ticket(&olga, "owner");
    let ids = |token: &str, arguments: Value| -> Vec<String> {
        let listed = structured_as(&s, &schemas, token, "list_pending_approvals", arguments);
        listed["approvals"].as_array().unwrap().iter().map(|a| a["approval_id"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(ids(&olga, json!({})), std::slice::from_ref(&olgas), "a reader sees its own");
    assert!(ids(&olga, json!({"submitted_by": "admin"})).is_empty(), "another's reads as none");
    let mut all = ids(&s.token, json!({}));
    all.sort();
    let mut both = vec![admins.clone(), olgas.clone()];
    both.sort();
    assert_eq!(all, both, "the administrator reviews: every ticket");
    assert_eq!(ids(&s.token, json!({"submitted_by": "olga"})), [olgas]);
}

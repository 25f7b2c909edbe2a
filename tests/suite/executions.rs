//! Instructions, executions, compliance and quarantine end to end, on real agent processes
//! (this binary, `agent run`, each with a hostname and a working directory of its own) and a
//! real server, killed and restarted where the issue says. Every wait is a poll with a
//! generous bound.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::agents::*;
use common::{Server, call_as, now_ms, start_in};
use serde_json::{Value, json};

fn sha256_of(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8(out.stdout).unwrap().split_whitespace().next().unwrap().to_string()
}

fn statuses(status: &Value) -> BTreeMap<String, String> {
    status["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["hostname"].as_str().unwrap().to_string(), a["status"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn a_read_only_bundle_across_a_scope_returns_each_agents_hostname_and_file_hash() {
    let Fleet { s, schemas, states, agents: _agents, ids } = fleet_of_three(FAST);

    // The gate checks the definition and its parameters before anything else.
    let missing = call_as(
        &s,
        &s.token,
        "execute_instruction",
        json!({"definition": "file_hash", "params": {}, "scope": "status = online"}),
    );
    assert!(refusal(&missing).contains("path"), "{missing:?}");
    let typo =
        call_as(&s, &s.token, "execute_instruction", json!({"definition": "file_hsh", "agent_ids": [ids["fleet-a"]]}));
    assert!(refusal(&typo).contains("did you mean `file_hash`"), "{typo:?}");
    let untargeted = call_as(&s, &s.token, "execute_instruction", json!({"definition": "os_facts"}));
    assert!(refusal(&untargeted).contains("exactly one of `agent_ids`"), "{untargeted:?}");
    let nobody =
        call_as(&s, &s.token, "execute_instruction", json!({"definition": "os_facts", "scope": "hostname = nobody"}));
    assert!(refusal(&nobody).contains("chooses no enrolled"), "{nobody:?}");

    let started = structured(
        &s,
        &schemas,
        "execute_bundle",
        json!({"steps": [{"definition": "os_facts"}, {"definition": "file_hash", "params": {"path": PROBE}}], "scope": "hostname ~ \"fleet-*\""}),
    );
    assert_eq!(started["targeted"], 3, "{started}");
    let bundle = started["bundle_id"].as_str().unwrap().to_string();
    let status = wait_finished(&s, &schemas, &s.token, &bundle);
    assert_eq!(status["counts"], json!({"succeeded": 3}), "{status}");

    // One row per agent per step: step 0 says the agent's own hostname, step 1 its own file.
    let facts = structured(&s, &schemas, "query_responses", json!({"execution_id": bundle, "step": 0}));
    let mut hostnames: Vec<&str> =
        facts["rows"].as_array().unwrap().iter().map(|r| r["values"]["hostname"].as_str().unwrap()).collect();
    hostnames.sort_unstable();
    assert_eq!(hostnames, ["fleet-a", "fleet-b", "fleet-c"], "{facts}");
    let hashes = structured(&s, &schemas, "query_responses", json!({"execution_id": bundle, "step": 1}));
    assert_eq!(hashes["columns"], json!(["path", "size_bytes", "sha256"]));
    let rows = hashes["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{hashes}");
    for row in rows {
        let name = row["hostname"].as_str().unwrap();
        let own = states.path().join(format!("{name}.cwd/probe.txt"));
        assert_eq!(row["values"]["sha256"], sha256_of(&own), "{name}: {row}");
        assert_eq!(row["agent_id"], ids[name]);
    }
    let one = structured(
        &s,
        &schemas,
        "query_responses",
        json!({"execution_id": bundle, "step": 1, "where": {"sha256": sha256_of(&states.path().join("fleet-b.cwd/probe.txt"))}}),
    );
    assert_eq!(one["rows"].as_array().unwrap().len(), 1);
    assert_eq!(one["rows"][0]["hostname"], "fleet-b");

    // Grouped: every agent runs this machine's OS; three distinct files.
    let by_os = structured(
        &s,
        &schemas,
        "aggregate_responses",
        json!({"execution_id": bundle, "group_by": "os", "of": "cpu_count"}),
    );
    assert_eq!(by_os["groups"].as_array().unwrap().len(), 1, "{by_os}");
    assert_eq!(by_os["groups"][0]["count"], 3);
    assert!(by_os["groups"][0]["min"].as_i64().unwrap() >= 1, "{by_os}");
    let by_hash = structured(
        &s,
        &schemas,
        "aggregate_responses",
        json!({"execution_id": bundle, "step": 1, "group_by": "sha256"}),
    );
    assert_eq!(by_hash["groups"].as_array().unwrap().iter().map(|g| g["count"].as_i64().unwrap()).sum::<i64>(), 3);
    assert_eq!(by_hash["groups"].as_array().unwrap().len(), 3);
    let wrong =
        call_as(&s, &s.token, "aggregate_responses", json!({"execution_id": bundle, "step": 1, "group_by": "sha265"}));
    assert!(refusal(&wrong).contains("did you mean `sha256`"), "{wrong:?}");

    let result = structured(&s, &schemas, "get_bundle_result", json!({"bundle_id": bundle}));
    for agent in result["agents"].as_array().unwrap() {
        let steps: Vec<&str> =
            agent["steps"].as_array().unwrap().iter().map(|s| s["status"].as_str().unwrap()).collect();
        assert_eq!(steps, ["succeeded", "succeeded"], "{result}");
    }
    // Fidelity: per step, agents expected, answers received, successes.
    let counted: Vec<(i64, i64, i64)> = result["step_counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["expected"].as_i64().unwrap(), c["received"].as_i64().unwrap(), c["succeeded"].as_i64().unwrap()))
        .collect();
    assert_eq!(counted, [(3, 3, 3), (3, 3, 3)], "{result}");
    // A bundle stops an agent at its first failure: a missing file, then a step never run.
    let stopped = structured(
        &s,
        &schemas,
        "execute_bundle",
        json!({"steps": [{"definition": "file_hash", "params": {"path": "/nonexistent/file"}}, {"definition": "os_facts"}], "agent_ids": [ids["fleet-a"]]}),
    );
    let stopped_id = stopped["bundle_id"].as_str().unwrap().to_string();
    wait_finished(&s, &schemas, &s.token, &stopped_id);
    let result = structured(&s, &schemas, "get_bundle_result", json!({"bundle_id": stopped_id}));
    let steps = &result["agents"][0]["steps"];
    assert_eq!(
        (steps[0]["status"].as_str(), steps[1]["status"].as_str()),
        (Some("failed"), Some("skipped")),
        "{result}"
    );
    assert!(steps[0]["error"].as_str().unwrap().contains("/nonexistent/file"), "{result}");
    assert_eq!(result["step_counts"][1]["received"], 1, "a skipped step is an answer: {result}");
    assert_eq!(result["step_counts"][0]["succeeded"], 0, "{result}");
    // Fidelity: one audit row per step of each bundle (2 + 2), beside the calls' own.
    let api = common::api_credential(&s, "admin");
    let rows = s.http("GET", "/api/v1/audit?action=execution.bundle_step&limit=100", Some(&api), None).json();
    let details: Vec<&str> =
        rows["entries"].as_array().unwrap().iter().map(|e| e["detail"].as_str().unwrap()).collect();
    assert_eq!(details.len(), 4, "{details:?}");
    assert!(
        details.iter().any(|d| d.contains(&format!("bundle {stopped_id} step 1 of 2: os_facts on 1 agent"))),
        "{details:?}"
    );

    let listed = structured(&s, &schemas, "list_executions", json!({"definition": "file_hash"}));
    assert_eq!(listed["executions"].as_array().unwrap().len(), 2, "{listed}");
    assert_eq!(listed["executions"][0]["execution_id"], stopped_id, "newest first");
}

/// What happens past the deadline is the hub's test on an injected clock
/// (`a_target_offline_past_the_deadline_is_finished_offline_and_never_sent`): waiting out a
/// real one here cost the suite ten seconds.
#[test]
fn an_offline_agent_runs_the_command_when_it_reconnects_before_the_deadline_and_a_cancelled_one_never() {
    let Fleet { s, schemas, states, mut agents, ids } = fleet_of_three(FAST);
    agents[1].kill();
    wait_for_status(&s, &schemas, &ids["fleet-b"], "offline");

    let marker = |name: &str| states.path().join(name).join("work/marker");
    let started = structured(
        &s,
        &schemas,
        "execute_instruction",
        json!({"definition": "write_marker", "params": {"name": "marker", "text": "hello"}, "agent_ids": [ids["fleet-a"], ids["fleet-b"]]}),
    );
    assert_eq!((started["targeted"].clone(), started["delivered_now"].clone()), (json!(2), json!(1)), "{started}");
    let execution = started["execution_id"].as_str().unwrap().to_string();
    let pending =
        structured(&s, &schemas, "get_execution_status", json!({"execution_id": execution, "status": "pending"}));
    assert_eq!(pending["agents"][0]["agent_id"], ids["fleet-b"], "{pending}");
    assert!(!marker("fleet-b").exists());
    agents[1] = restart_agent(&s, states.path(), "fleet-b");
    let done = wait_finished(&s, &schemas, &s.token, &execution);
    assert_eq!(done["counts"], json!({"succeeded": 2}), "{done}");
    assert_eq!(std::fs::read_to_string(marker("fleet-b")).unwrap(), "hello");

    // Cancelling: what has not reached an agent stops; what ran is reported, not undone.
    agents[2].kill();
    wait_for_status(&s, &schemas, &ids["fleet-c"], "offline");
    let started = structured(
        &s,
        &schemas,
        "execute_instruction",
        json!({"definition": "write_marker", "params": {"name": "cancelled"}, "agent_ids": [ids["fleet-a"], ids["fleet-c"]], "deadline_seconds": 10}),
    );
    let in_ten_seconds = now_ms() + 10_000;
    let deadline_ms = started["deadline_ms"].as_i64().unwrap();
    assert!((in_ten_seconds - 5_000..=in_ten_seconds).contains(&deadline_ms), "deadline_seconds is taken: {started}");
    let execution = started["execution_id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + PATIENCE;
    while structured(&s, &schemas, "get_execution_status", json!({"execution_id": execution}))["counts"]["succeeded"]
        != 1
    {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(100));
    }
    let cancelled = structured(&s, &schemas, "cancel_execution", json!({"execution_id": execution}));
    assert_eq!(cancelled["stopped"], 1, "{cancelled}");
    assert_eq!(cancelled["already_ran"], json!([{"agent_id": ids["fleet-a"], "status": "succeeded"}]));
    let again = structured(&s, &schemas, "cancel_execution", json!({"execution_id": execution}));
    assert_eq!(again["stopped"], 0, "cancelling twice changes nothing");
    let _back = restart_agent(&s, states.path(), "fleet-c");
    wait_for_status(&s, &schemas, &ids["fleet-c"], "online");
    std::thread::sleep(Duration::from_secs(1));
    assert!(!states.path().join("fleet-c/work/cancelled").exists(), "a cancelled run is never sent");
}

fn line_count(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

#[test]
fn an_approved_change_runs_exactly_once_per_agent_across_agent_and_server_crashes() {
    let Fleet { s, schemas, states, mut agents, ids } = fleet_of_three(FAST);
    let supervised = s.token("admin", "supervised", "1h");
    let api = common::console::reviewer(&s, "reviewer");

    // Held for a person, planned on the three, approved; then fleet-b is stopped: it receives
    // the run but cannot act on it before it is killed.
    let arguments = json!({"definition": "append_line", "params": {"file": "audit.log", "line": "checked"}, "scope": "hostname ~ \"fleet-*\""});
    let ticket = approval_id(&call_as(&s, &supervised, "execute_instruction", arguments.clone()));
    common::agents::approve(&s, &api, &ticket);
    agents[1].signal("-STOP");
    let mut recall = arguments;
    recall["approval_id"] = json!(ticket);
    let started = structured_as(&s, &schemas, &supervised, "execute_instruction", recall.clone());
    let execution = started["execution_id"].as_str().unwrap().to_string();
    // The server and fleet-b die mid-execution; both come back.
    agents[1].kill();
    let addr = s.addr.to_string();
    let dir = s.crash();
    let s = start_in(dir, &[FAST, &["--listen", &addr]].concat());
    agents[1] = restart_agent(&s, states.path(), "fleet-b");
    let done = wait_finished(&s, &schemas, &s.token, &execution);
    assert_eq!(done["counts"], json!({"succeeded": 3}), "{done}");
    let targeted: std::collections::BTreeSet<&str> =
        done["agents"].as_array().unwrap().iter().map(|a| a["agent_id"].as_str().unwrap()).collect();
    assert_eq!(targeted, ids.values().map(String::as_str).collect(), "the scope chose the three");
    for name in ["fleet-a", "fleet-b", "fleet-c"] {
        assert_eq!(line_count(&states.path().join(name).join("work/audit.log")), 1, "{name} gained exactly one line");
    }
    // The approval was used once: replaying the recall is refused, and nothing runs again.
    let replay = call_as(&s, &supervised, "execute_instruction", recall);
    assert!(refusal(&replay).contains("approval"), "{replay:?}");
    // A server restart does not resend a finished run either.
    let dir = s.stop();
    let s = start_in(dir, &[FAST, &["--listen", &addr]].concat());
    online_by_hostname(&s, &schemas, 3);
    std::thread::sleep(Duration::from_secs(1));
    for name in ["fleet-a", "fleet-b", "fleet-c"] {
        assert_eq!(line_count(&states.path().join(name).join("work/audit.log")), 1, "{name}");
    }
}

#[test]
fn compliance_rules_are_evaluated_by_real_agents_with_evidence_and_reloaded_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let dpkg_version =
        String::from_utf8(Command::new("dpkg-query").args(["-W", "-f", "${Version}", "dpkg"]).output().unwrap().stdout)
            .unwrap();
    let rules = |extra: &str| {
        format!(
            "rules:\n  - id: dpkg-current\n    description: dpkg is at least 1.0\n    check: {{package_at_least: {{package: dpkg, version: \"1.0\"}}}}\n  - id: probe-says-a\n    description: the probe file names fleet-a\n    check: {{file_contains_line: {{path: {PROBE}, line: probe of fleet-a}}}}\n{extra}"
        )
    };
    std::fs::write(dir.path().join("compliance.yaml"), rules("")).unwrap();
    let s = start_in(dir, FAST);
    let schemas = output_schemas(&s);
    let states = tempfile::tempdir().unwrap();
    let (_agents, _ids) = three_agents(&s, states.path());

    let summary = |s: &Server, id: &str| {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let summary = structured(s, &schemas, "get_compliance_summary", json!({"policy_id": id}));
            if summary["not_evaluated"] == 0 {
                return summary;
            }
            assert!(Instant::now() < deadline, "{summary}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let dpkg = summary(&s, "dpkg-current");
    assert_eq!(dpkg["counts"], json!({"compliant": 3, "non_compliant": 0, "unknown": 0}), "{dpkg}");
    assert!(dpkg["agents"][0]["evidence"].as_str().unwrap().contains(&dpkg_version), "{dpkg}");
    let probe = summary(&s, "probe-says-a");
    assert_eq!(probe["counts"], json!({"compliant": 1, "non_compliant": 2, "unknown": 0}), "{probe}");
    for agent in probe["agents"].as_array().unwrap() {
        let expected = if agent["hostname"] == "fleet-a" { "compliant" } else { "non_compliant" };
        assert_eq!(agent["status"], expected, "{agent}");
        assert!(agent["evidence"].as_str().unwrap().contains("probe"), "{agent}");
    }
    let fleet = structured(&s, &schemas, "get_fleet_compliance", json!({}));
    assert_eq!((fleet["fully_compliant"].clone(), fleet["with_violations"].clone()), (json!(1), json!(2)), "{fleet}");

    // SIGHUP: a broken file is refused and the rules stay; a good one adds a rule, evaluated on demand.
    let compliance = s.data_dir.path().join("compliance.yaml");
    std::fs::write(&compliance, rules("  - id: bad\n    description: x\n    check: {port_not_listening: {port: 0}}\n"))
        .unwrap();
    assert!(Command::new("kill").args(["-HUP", &s.pid().to_string()]).status().unwrap().success());
    std::thread::sleep(Duration::from_millis(500));
    let policies = structured(&s, &schemas, "list_policies", json!({}));
    assert_eq!(policies["policies"].as_array().unwrap().len(), 2, "the last good rules stay: {policies}");
    let port = s.addr.port();
    std::fs::write(&compliance, rules(&format!("  - id: server-port-closed\n    description: nothing listens on the server's port\n    check: {{port_not_listening: {{port: {port}}}}}\n"))).unwrap();
    assert!(Command::new("kill").args(["-HUP", &s.pid().to_string()]).status().unwrap().success());
    let deadline = Instant::now() + PATIENCE;
    while structured(&s, &schemas, "list_policies", json!({}))["policies"].as_array().unwrap().len() != 3 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(100));
    }
    let asked = structured(&s, &schemas, "evaluate_compliance", json!({}));
    assert_eq!(asked["asked"], 3, "{asked}");
    let port_rule = summary(&s, "server-port-closed");
    assert_eq!(port_rule["counts"]["non_compliant"], 3, "the server listens there: {port_rule}");
    assert!(port_rule["agents"][0]["evidence"].as_str().unwrap().contains(&port.to_string()), "{port_rule}");
}

/// Issue 43, 14: `set_plugin_kill_switch` stored a row nothing read, so a killed plugin's
/// executions still ran. An engaged switch refuses new executions before any target is made
/// (naming the switch, its reason and who set it), refuses the targets of a running one not
/// yet sent (get_execution_status says so), and reaches the agents, which refuse the plugin
/// even from a server that has not heard of the switch.
#[test]
fn an_engaged_kill_switch_stops_the_plugin_on_the_server_and_on_the_agents() {
    let Fleet { s, schemas, states, mut agents, ids } = fleet_of_three(FAST);
    let admin = s.token("admin", "supervised", "1d");
    let switch = |enabled: bool| {
        let arguments = json!({"plugin": "workspace", "enabled": enabled, "reason": "incident 42"});
        common::confirmed_call(&s, &admin, "set_plugin_kill_switch", arguments)["result"]["structuredContent"].clone()
    };
    let unknown =
        common::confirmed_call(&s, &admin, "set_plugin_kill_switch", json!({"plugin": "sync", "enabled": true}));
    let problem = &unknown["result"]["structuredContent"]["errors"][0];
    assert_eq!(problem["pointer"], "/plugin", "refused before the user is asked: {unknown}");
    assert!(problem["message"].as_str().unwrap().contains("no plugin `sync`"), "{unknown}");

    // A running execution: fleet-b is offline, so its target waits.
    agents[1].kill();
    wait_for_status(&s, &schemas, &ids["fleet-b"], "offline");
    let marker = json!({"definition": "write_marker", "params": {"name": "before"}, "agent_ids": [ids["fleet-a"], ids["fleet-b"]]});
    let running = structured(&s, &schemas, "execute_instruction", marker)["execution_id"].as_str().unwrap().to_string();
    let engaged = switch(true);
    assert_eq!(engaged["stopped_executions"], json!([running]), "{engaged}");
    let status = structured(&s, &schemas, "get_execution_status", json!({"execution_id": running}));
    assert_eq!(statuses(&status)["fleet-b"], "refused", "{status}");
    assert!(status.to_string().contains("kill switch of plugin `workspace` is engaged (incident 42; set by admin"));

    // New ones are refused before any target is made.
    let again = json!({"definition": "write_marker", "params": {"name": "after"}, "agent_ids": [ids["fleet-a"]]});
    let refused = call_as(&s, &s.token, "execute_instruction", again).json();
    assert_eq!(refused["error"]["code"], -32003, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("incident 42; set by admin"), "{refused}");
    let listed = structured(&s, &schemas, "list_executions", json!({}));
    assert_eq!(listed["executions"].as_array().unwrap().len(), 1, "nothing new was stored: {listed}");

    // The agents were told: the switch is kept in fleet-a's state dir.
    let kept = states.path().join("fleet-a/kill-switches.json");
    let deadline = Instant::now() + PATIENCE;
    while !std::fs::read_to_string(&kept).is_ok_and(|t| t.contains("workspace")) {
        assert!(Instant::now() < deadline, "fleet-a never kept the switch");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Released: it runs again, and the agents are told that too.
    assert_eq!(switch(false)["enabled"], false);
    let released = json!({"definition": "write_marker", "params": {"name": "released"}, "agent_ids": [ids["fleet-a"]]});
    let execution =
        structured(&s, &schemas, "execute_instruction", released)["execution_id"].as_str().unwrap().to_string();
    assert_eq!(wait_finished(&s, &schemas, &s.token, &execution)["counts"], json!({"succeeded": 1}));
    assert!(states.path().join("fleet-a/work/released").exists());
    assert!(!states.path().join("fleet-b/work/before").exists(), "the stopped target never ran");
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "[]");
}

/// Issue 43, 15: values set with set_plugin_config reached nothing. The action that declares a
/// key is given its value with every run sent, and obeys it: a real agent refuses to grow a
/// file past the workspace plugin's `max_file_bytes`, and appends again once it is raised.
#[test]
fn plugin_configuration_reaches_the_actions_that_declare_it() {
    let (s, agent) = common::start_with_agent(&[]);
    let schemas = output_schemas(&s);
    let admin = s.token("admin", "supervised", "1d");
    let set = |value: &str| {
        let arguments = json!({"plugin": "workspace", "key": "max_file_bytes", "value": value});
        common::confirmed_call(&s, &admin, "set_plugin_config", arguments)["result"]["structuredContent"].clone()
    };
    assert_eq!(set("16")["read_by"], json!(["workspace.append_line"]));
    let append = |line: &str| {
        let arguments =
            json!({"definition": "append_line", "params": {"file": "capped", "line": line}, "agent_ids": [agent]});
        let started = structured(&s, &schemas, "execute_instruction", arguments);
        wait_finished(&s, &schemas, &s.token, started["execution_id"].as_str().unwrap())["agents"][0].clone()
    };
    assert_eq!(append("0123456789")["status"], "succeeded");
    let refused = append("abcdefghij");
    assert_eq!(refused["status"], "failed", "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("past the 16 the workspace plugin's configuration `max_file_bytes`")
    );
    set("1000");
    assert_eq!(append("abcdefghij")["status"], "succeeded", "the value as set when the run is sent");
    let file = s.data_dir.path().join("local-agent/work/capped");
    assert_eq!(std::fs::read_to_string(file).unwrap(), "0123456789\nabcdefghij\n");
    let unread = common::confirmed_call(
        &s,
        &admin,
        "set_plugin_config",
        json!({"plugin": "sync", "key": "interval", "value": "5"}),
    );
    assert_eq!(unread["result"]["structuredContent"]["read_by"], json!([]), "{unread}");
}

//! Two real `toolgate serve` processes on one real PostgreSQL database (a fresh database per
//! test in the cluster TOOLGATE_TEST_POSTGRES names; scripts/test.sh starts one), with real
//! agents: the replicas behave as one server. Figures (revocation delay, recalls, execution
//! across replicas) are printed for the record; bounds are generous, never timings.

use crate::common;

use std::collections::HashMap;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::agents::{
    PATIENCE, approval_id, every_page, mint, output_schemas, spawn_agent_to, structured, structured_as, wait_finished,
};
use common::console::{approve, approved_on, reviewer};
use common::replicas::{fresh_database, replicas};
use common::{Server, call_as, request};
use serde_json::{Value, json};

fn ok(r: &common::Response) -> Value {
    let v = r.json();
    assert_eq!(v["result"]["isError"], false, "{v}");
    v["result"]["structuredContent"].clone()
}

#[test]
fn two_replicas_behave_as_one() {
    let database = fresh_database("replicas_one");
    let rules = tempfile::tempdir().unwrap();
    let compliance = rules.path().join("compliance.yaml");
    std::fs::write(&compliance, "rules:\n  - id: port-one-closed\n    description: nothing listens on port 1\n    check: {port_not_listening: {port: 1}}\n").unwrap();
    // A long authentication cache: only the database's notice can explain a quick refusal.
    let (a, b) = replicas(&database, &["--auth-cache-ttl-ms", "600000", "--compliance", compliance.to_str().unwrap()]);
    let schemas = output_schemas(&a);
    let operator = a.token.clone();
    let supervised = a.token("admin", "supervised", "1d");
    let carol = reviewer(&b, "carol");

    // A token minted through A (approved on B's console, recalled on A) works on B at once.
    let expires_at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 3600;
    let created = approved_on(
        &a,
        &b,
        &carol,
        &supervised,
        "create_api_token",
        json!({"name": "replica-test", "mcp_tier": "readonly", "expires_at": expires_at}),
    );
    let (minted, minted_id) = (created["secret"].as_str().unwrap().to_string(), created["token_id"].clone());
    ok(&call_as(&b, &minted, "list_management_groups", json!({})));
    // Revoked through A while B has it cached: B refuses it as soon as the notice arrives.
    approved_on(&a, &b, &carol, &supervised, "revoke_api_token", json!({"token_id": minted_id}));
    let revoked_at = Instant::now();
    let delay = loop {
        if call_as(&b, &minted, "list_management_groups", json!({})).status == 401 {
            break revoked_at.elapsed();
        }
        assert!(revoked_at.elapsed() < Duration::from_secs(30), "B still takes a token A revoked");
        std::thread::sleep(Duration::from_millis(5));
    };
    eprintln!("figure: a revocation through A refused by B after {} ms (cache TTL 600 s)", delay.as_millis());

    // An agent connected to A; an execution requested through B reaches it; both read it.
    let states = tempfile::tempdir().unwrap();
    let enroll = mint(&a, &["--uses", "1"]);
    let _agent = spawn_agent_to(&[&a, &b], Some(&enroll), &states.path().join("r1"), Some("replica-host"), None);
    let agent_id = wait_online(&b, &schemas, "replica-host");
    let asked = Instant::now();
    let started =
        structured(&b, &schemas, "execute_instruction", json!({"definition": "os_facts", "agent_ids": [agent_id]}));
    let execution_id = started["execution_id"].as_str().unwrap().to_string();
    let on_b = wait_finished(&b, &schemas, &operator, &execution_id);
    eprintln!(
        "figure: an execution requested through B, run by an agent on A, finished after {} ms",
        asked.elapsed().as_millis()
    );
    let on_a = wait_finished(&a, &schemas, &operator, &execution_id);
    assert_eq!(on_a["counts"], on_b["counts"], "one execution, read through either");
    let rows =
        |s: &Server| structured(s, &schemas, "query_responses", json!({"execution_id": execution_id}))["rows"].clone();
    assert_eq!(rows(&a), rows(&b));
    assert_eq!(rows(&a).as_array().unwrap().len(), 1, "the agent's one row");

    // Compliance asked through B is evaluated by the agent on A (its first evaluation came
    // with A's welcome; a new one follows B's request).
    let evaluated = || {
        let summary = structured(&b, &schemas, "get_compliance_summary", json!({"policy_id": "port-one-closed"}));
        summary["agents"].as_array().unwrap().first().map(|a| a["evaluated_at_ms"].as_i64().unwrap())
    };
    let deadline = Instant::now() + PATIENCE;
    let first = loop {
        if let Some(at) = evaluated() {
            break at;
        }
        assert!(Instant::now() < deadline, "the agent on A never evaluated its rules");
        std::thread::sleep(Duration::from_millis(50));
    };
    let asked = structured(&b, &schemas, "evaluate_compliance", json!({"agent_ids": [agent_id]}));
    assert_eq!((asked["asked"].as_i64(), asked["offline"].as_i64()), (Some(1), Some(0)), "{asked}");
    while evaluated() == Some(first) {
        assert!(Instant::now() < deadline, "B's request never reached the agent on A");
        std::thread::sleep(Duration::from_millis(50));
    }

    // An approval minted on A, approved on B, recalled by 64 callers split across both: the
    // tool runs once.
    ok(&call_as(&a, &operator, "set_tag", json!({"agent_id": agent_id, "key": "env", "value": "prod"})));
    let arguments = json!({"agent_id": agent_id, "key": "env"});
    let id = approval_id(&call_as(&a, &operator, "delete_tag", arguments.clone()));
    assert_eq!(approve(&b, &carol, &id).status, 200);
    let mut recall = arguments;
    recall["approval_id"] = json!(id);
    let (a, b) = (Arc::new(a), Arc::new(b));
    let recalls: Vec<_> = (0..64)
        .map(|i| {
            let (server, token, recall) =
                (if i % 2 == 0 { a.clone() } else { b.clone() }, operator.clone(), recall.clone());
            std::thread::spawn(move || call_as(&server, &token, "delete_tag", recall).json())
        })
        .collect();
    let answers: Vec<Value> = recalls.into_iter().map(|t| t.join().unwrap()).collect();
    let ran = answers.iter().filter(|v| v["result"]["isError"] == false).count();
    eprintln!("figure: 64 concurrent recalls (32 on A, 32 on B): {ran} ran the tool");
    assert_eq!(ran, 1, "{answers:?}");

    // Audit rows from both replicas land in one log, each naming its replica.
    let audit = structured(&a, &schemas, "query_audit_log", json!({"action": "mcp.", "limit": 500}));
    let by_replica =
        audit["entries"].as_array().unwrap().iter().fold(HashMap::new(), |mut m: HashMap<String, usize>, e| {
            *m.entry(e["replica"].as_str().unwrap_or("none").to_string()).or_default() += 1;
            m
        });
    assert!(
        by_replica.get("a").is_some_and(|n| *n > 0) && by_replica.get("b").is_some_and(|n| *n > 0),
        "{by_replica:?}"
    );
    assert!(!by_replica.contains_key("none"), "every row names its replica: {by_replica:?}");

    sessions_cross_replicas(&a, &b, &operator);
}

/// Waits until `s` lists the agent named `hostname` online; its id.
fn wait_online(s: &Server, schemas: &HashMap<String, Value>, hostname: &str) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let listed = structured(s, schemas, "list_agents", json!({"status": "online"}));
        if let Some(agent) = listed["agents"].as_array().unwrap().iter().find(|a| a["hostname"] == hostname) {
            return agent["agent_id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "{hostname} not online: {listed}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A handshake-era session opened on A is good on B; a stream resumed on B is told clearly to
/// initialize again; a session ended on B is gone on A.
fn sessions_cross_replicas(a: &Server, b: &Server, token: &str) {
    let sid = common::initialize(a, token, json!({}));
    let auth = format!("Bearer {token}");
    let headers =
        [("Authorization", auth.as_str()), ("Mcp-Session-Id", sid.as_str()), ("MCP-Protocol-Version", "2025-11-25")];
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let on_b = request(b.addr, "POST", &headers, Some(&list));
    assert_eq!(on_b.status, 200, "a session opened on A is good on B: {on_b:?}");
    assert!(on_b.json()["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()));
    // A stream A served cannot be resumed on B: a clear 404 that says to initialize again.
    let mut resume = headers.to_vec();
    resume.extend([("Accept", "text/event-stream"), ("Last-Event-ID", "0-3")]);
    let resumed = request(b.addr, "GET", &resume, None);
    assert_eq!(resumed.status, 404, "{resumed:?}");
    assert!(resumed.body.contains("initialize again"), "{}", resumed.body);
    // Ended on B (the failed resume ended it there already, or DELETE does): unknown on A.
    let sid = common::initialize(a, token, json!({}));
    let headers =
        [("Authorization", auth.as_str()), ("Mcp-Session-Id", sid.as_str()), ("MCP-Protocol-Version", "2025-11-25")];
    assert_eq!(request(b.addr, "DELETE", &headers, None).status, 200);
    // A hears of it through the database's notice: soon, not necessarily at once.
    let deadline = Instant::now() + PATIENCE;
    while request(a.addr, "POST", &headers, Some(&list)).status != 404 {
        assert!(Instant::now() < deadline, "a session ended on B still works on A");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_replica_killed_mid_load_loses_nothing_it_acknowledged() {
    let database = fresh_database("replicas_kill");
    let (a, b) = replicas(&database, &[]);
    let schemas = output_schemas(&a);
    let token = a.token.clone();
    let states = tempfile::tempdir().unwrap();
    let enroll = mint(&a, &["--uses", "1"]);
    let agent = spawn_agent_to(&[&a, &b], Some(&enroll), &states.path().join("k1"), Some("failover-host"), None);
    let agent_id = wait_online(&a, &schemas, "failover-host");

    // Four writers, two on each replica, each setting tags of its own until told to stop.
    let (a, b) = (Arc::new(a), Arc::new(b));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (server, token, agent_id, stop) =
                (if w < 2 { a.clone() } else { b.clone() }, token.clone(), agent_id.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut acknowledged = Vec::new();
                // At most 240 each: the audit log answers up to 1000 rows at once.
                for i in 0..240 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(4));
                    let key = format!("w{w}-{i}");
                    let arguments = json!({"agent_id": agent_id, "key": key, "value": "v"});
                    let r = call_as(&server, &token, "set_tag", arguments);
                    if r.status == 200 && r.json()["result"]["isError"] == false {
                        acknowledged.push(key);
                    }
                    if r.status == 0 {
                        // The connection failed: this replica is gone.
                        break;
                    }
                }
                acknowledged
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let killed_at = Instant::now();
    // SIGKILL: no drain, no goodbye (the writers still hold A's handle).
    assert!(Command::new("kill").args(["-KILL", &a.pid().to_string()]).status().unwrap().success());
    std::thread::sleep(Duration::from_millis(1000));
    stop.store(true, Ordering::Relaxed);
    let acknowledged: Vec<String> = writers.into_iter().flat_map(|t| t.join().unwrap()).collect();
    assert!(acknowledged.len() > 8, "the load ran: {}", acknowledged.len());

    // Every acknowledged write is there, with its audit row.
    let tags = every_page(&b, &schemas, "get_tags", json!({"agent_id": agent_id}), "tags");
    let kept: std::collections::HashSet<&str> = tags.iter().filter_map(|t| t["key"].as_str()).collect();
    let lost: Vec<&String> = acknowledged.iter().filter(|k| !kept.contains(k.as_str())).collect();
    assert!(lost.is_empty(), "acknowledged and lost: {lost:?}");
    let audit = json!({"action": "mcp.set_tag", "result": "success", "limit": 1000});
    let audited = every_page(&b, &schemas, "query_audit_log", audit, "entries").len();
    assert!(audited >= acknowledged.len(), "{audited} audit rows for {} acknowledged writes", acknowledged.len());
    eprintln!(
        "figure: {} writes acknowledged across the kill of A, all kept, {audited} audit rows",
        acknowledged.len()
    );

    // The agent connected to A moves to B; an execution through B reaches it.
    let started =
        structured(&b, &schemas, "execute_instruction", json!({"definition": "os_facts", "agent_ids": [agent_id]}));
    let execution_id = started["execution_id"].as_str().unwrap().to_string();
    wait_finished(&b, &schemas, &token, &execution_id);
    eprintln!(
        "figure: the agent of the killed replica ran B's execution {} ms after the kill",
        killed_at.elapsed().as_millis()
    );
    assert!(agent.log_text().contains("trying ws://"), "the agent moved to the next server: {}", agent.log_text());
    let _ = structured_as(&b, &schemas, &token, "get_agent_details", json!({"agent_id": agent_id}));
}

/// A 2026-07-28 `set_plugin_config` (confirmed by the client's user) with extra params.
fn modern_set(s: &Server, token: &str, value: &str, extra: Value) -> common::Response {
    let mut params =
        json!({"name": "set_plugin_config", "arguments": {"plugin": "sync", "key": "interval", "value": value}});
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": common::MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    });
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params});
    let auth = format!("Bearer {token}");
    let mut headers = common::modern_headers("tools/call", Some("set_plugin_config"));
    headers.push(("Authorization", &auth));
    request(s.addr, "POST", &headers, Some(&body.to_string()))
}

#[test]
fn questions_to_the_client_and_their_answers_cross_replicas() {
    use common::sse::{event_with, open_stream, read_through, rest_of};
    let database = fresh_database("replicas_ask");
    let (a, b) = replicas(&database, &[]);
    let token = a.token("admin", "supervised", "1d");
    let yes = json!({"toolgate_confirm": {"action": "accept", "content": {"toolgate_confirm": true}}});

    // 2026-07-28: a round issued by A is answered on B (one request-state key), once.
    let asked = modern_set(&a, &token, "45", json!({})).json();
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"].as_str().unwrap().to_string();
    let done = modern_set(&b, &token, "45", json!({"inputResponses": yes, "requestState": state})).json();
    assert_eq!(
        (done["result"]["resultType"].as_str(), done["result"]["isError"].as_bool()),
        (Some("complete"), Some(false)),
        "{done}"
    );
    let again = modern_set(&a, &token, "45", json!({"inputResponses": yes, "requestState": state}));
    assert_eq!(again.error_code(), -32602, "good once across replicas: {again:?}");
    assert!(again.json()["error"]["message"].as_str().unwrap().contains("already used"), "{again:?}");

    // Handshake era: a call on A asks the client; the client's answer reaches B, which passes
    // it on; A's call runs.
    let sid = common::initialize(&a, &token, json!({"elicitation": {}}));
    let auth = format!("Bearer {token}");
    let headers =
        [("Authorization", auth.as_str()), ("Mcp-Session-Id", sid.as_str()), ("MCP-Protocol-Version", "2025-11-25")];
    let call = common::call("set_plugin_config", json!({"plugin": "sync", "key": "interval", "value": "60"}));
    let (mut stream, first) = open_stream(&a, &headers, &call.to_string());
    let first = read_through(&mut stream, first, "elicitation/create");
    let (_, question) = event_with(&first, "elicitation/create");
    let reply = json!({"jsonrpc": "2.0", "id": question["id"], "result": yes["toolgate_confirm"]});
    let posted = request(b.addr, "POST", &headers, Some(&reply.to_string()));
    assert_eq!(posted.status, 202, "{posted:?}");
    let rest = first + &rest_of(stream);
    let (_, answered) = event_with(&rest, "\"id\":7");
    assert_eq!(answered["result"]["isError"], false, "the call on A ran on the answer B took: {answered}");
    let stored =
        common::call_as(&b, &b.token, "get_plugin_config", json!({"plugin": "sync", "key": "interval"})).json();
    assert_eq!(stored["result"]["structuredContent"]["value"], "60");
}

/// A role on a group taken away through one database reaches both replicas as the database
/// tells them, long before their (here ten-minute) authentication caches would expire.
#[test]
fn a_group_role_revoked_reaches_a_caller_on_the_other_replica() {
    let database = fresh_database("replicas_groups");
    let (a, b) = replicas(&database, &["--auth-cache-ttl-ms", "600000"]);
    let schemas = output_schemas(&a);
    let states = tempfile::tempdir().unwrap();
    let enroll = mint(&a, &[]);
    let _agent = spawn_agent_to(&[&a], Some(&enroll), &states.path().join("g1"), Some("group-host"), None);
    let agent = wait_online(&a, &schemas, "group-host");
    structured(&a, &schemas, "set_tag", json!({"agent_id": agent, "key": "team", "value": "a"}));
    let out = a.cli(&["group", "create", "Team A", "--rule", "tag:team = a"]);
    let group = out.split_whitespace().find(|w| w.starts_with("mg-")).unwrap().to_string();
    a.cli(&["principal", "add", "alice"]);
    a.cli(&["group", "assign", &group, "alice", "Operator"]);
    let alice = a.token("alice", "operator", "1d");
    // On B, which the agent is not connected to, alice sees her group's one agent.
    let listed = structured_as(&b, &schemas, &alice, "list_agents", json!({}));
    assert_eq!(
        (listed["total"].clone(), listed["agents"][0]["agent_id"].clone()),
        (json!(1), json!(agent)),
        "{listed}"
    );
    a.cli(&["group", "unassign", &group, "alice", "Operator"]);
    let started = Instant::now();
    loop {
        let answer = call_as(&b, &alice, "list_agents", json!({})).json();
        if answer["error"]["code"] == -32003 {
            break;
        }
        assert!(started.elapsed() < PATIENCE, "alice still lists agents on B: {answer}");
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("a revoked group role reached the other replica after {:?}", started.elapsed());
}

/// An engine principal revoked through one replica is refused by the other at once: the
/// database tells it, long before its authentication cache (ten minutes here) would.
#[test]
fn an_engine_principal_revoked_on_one_replica_is_refused_on_the_other() {
    let database = fresh_database("replicas_engines");
    let (a, b) = replicas(&database, &["--auth-cache-ttl-ms", "600000"]);
    let schemas = output_schemas(&a);
    let rita = reviewer(&a, "rita");
    let admin = a.token("admin", "supervised", "1d");
    let id = "engine:replicated";
    let create = json!({"principal_id": id, "display_name": "R", "owner_username": "admin", "justification": "j",
                        "classification": "internal"});
    approved_on(&a, &a, &rita, &admin, "create_engine_principal", create);
    approved_on(&a, &a, &rita, &admin, "assign_engine_role", json!({"principal_id": id, "role": "Viewer"}));
    let minted = approved_on(&a, &a, &rita, &admin, "mint_engine_credential", json!({"principal_id": id}));
    let engine = minted["secret"].as_str().unwrap();
    structured_as(&b, &schemas, engine, "list_agents", json!({}));
    approved_on(&a, &a, &rita, &admin, "revoke_engine_principal", json!({"principal_id": id}));
    let started = Instant::now();
    while call_as(&b, engine, "list_agents", json!({})).status != 401 {
        assert!(started.elapsed() < PATIENCE, "B still serves the revoked engine principal");
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("a revoked engine principal reached the other replica after {:?}", started.elapsed());
}

/// Issue 43, 14: a kill switch engaged on replica A stops the plugin on replica B too, and
/// releasing it there lets it run again (B reads the switches when A says one changed).
#[test]
fn a_kill_switch_set_on_one_replica_stops_the_plugin_on_the_other() {
    let (a, b) = replicas(&fresh_database("kill_switch"), &[]);
    let admin = a.token("admin", "supervised", "1d");
    let set = |enabled: bool| {
        let arguments =
            json!({"plugin": "workspace", "action": "write_marker", "enabled": enabled, "reason": "incident 7"});
        common::confirmed_call(&a, &admin, "set_plugin_kill_switch", arguments)["result"]["structuredContent"].clone()
    };
    let start_on_b = || {
        let arguments =
            json!({"definition": "write_marker", "params": {"name": "m"}, "agent_ids": ["agt-0000000000000000"]});
        call_as(&b, &b.token, "execute_instruction", arguments).json()
    };
    let says_killed = |answer: &Value| answer.to_string().contains("kill switch of action `workspace.write_marker`");
    assert!(!says_killed(&start_on_b()), "not stopped yet");
    assert_eq!(set(true)["enabled"], true);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !says_killed(&start_on_b()) {
        assert!(Instant::now() < deadline, "B never heard of the switch: {}", start_on_b());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(set(false)["enabled"], false);
    while says_killed(&start_on_b()) {
        assert!(Instant::now() < deadline, "B never heard of the release");
        std::thread::sleep(Duration::from_millis(100));
    }
}

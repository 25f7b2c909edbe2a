//! Operations against the real binary: /metrics moves by exactly what a scripted sequence of
//! calls did; JSON log lines carry the correlation id; flags read TOOLGATE_* variables.

use crate::common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::agents::{approval_id, approve, output_schemas, structured_as};
use common::{Server, call_as, request_to, start_logging_to, wait_for_agents};
use serde_json::{Value, json};

/// Every sample of a Prometheus text page, by series (name and labels as written).
fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(series, value)| (series.to_string(), value.parse().unwrap()))
        .collect()
}

fn scrape(s: &Server, metrics: std::net::SocketAddr) -> HashMap<String, f64> {
    let r = request_to(metrics, "GET", "/metrics", &[], None);
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.header("content-type").unwrap().starts_with("text/plain; version=0.0.4"));
    let _ = s;
    samples(&r.body)
}

/// The address `serve` printed for --metrics-listen.
fn metrics_address(log_dir: &std::path::Path) -> std::net::SocketAddr {
    let stdout = std::fs::read_to_string(log_dir.join("stdout")).unwrap();
    let line = stdout.lines().find_map(|l| l.strip_prefix("toolgate: metrics at http://")).expect("metrics address");
    line.trim_end_matches("/metrics").parse().unwrap()
}

#[test]
fn metrics_move_by_exactly_what_was_done() {
    let logs = tempfile::tempdir().unwrap();
    let extra = ["--local-agent", "--metrics-listen", "127.0.0.1:0"];
    let s = start_logging_to(tempfile::tempdir().unwrap(), &extra, &[], Some(logs.path()));
    let agent = wait_for_agents(&s, &s.token, 1).remove(0);
    let metrics = metrics_address(logs.path());
    let reviewer = common::console::reviewer(&s, "reviewer");
    let api = reviewer.api.clone();
    let readonly = s.token("admin", "readonly", "1d");
    let schemas = output_schemas(&s);
    let before = scrape(&s, metrics);

    // The script: two lists; a tag set; a tier refusal; a ticket approved and recalled; one
    // rejected and recalled; one approved whose call fails in its handler (burned); a bad token;
    // a wrong console password.
    for _ in 0..2 {
        let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
        let r = common::request(s.addr, "POST", &[("Authorization", &format!("Bearer {}", s.token))], Some(&list));
        assert_eq!(r.status, 200);
    }
    assert_eq!(
        call_as(&s, &s.token, "set_tag", json!({"agent_id": agent, "key": "env", "value": "prod"})).json()["result"]["isError"],
        false
    );
    assert_eq!(
        call_as(&s, &readonly, "set_tag", json!({"agent_id": agent, "key": "env", "value": "x"})).error_code(),
        -32004
    );
    let approved_call = |arguments: Value, decide: &str| {
        let id = approval_id(&call_as(&s, &s.token, "delete_tag", arguments.clone()));
        match decide {
            "approve" => approve(&s, &reviewer, &id),
            _ => assert_eq!(common::console::decide(&s, &reviewer, &id, "reject", json!({})).status, 200),
        }
        let mut recall = arguments;
        recall["approval_id"] = json!(id);
        call_as(&s, &s.token, "delete_tag", recall)
    };
    assert_eq!(approved_call(json!({"agent_id": agent, "key": "env"}), "approve").json()["result"]["isError"], false);
    assert_eq!(approved_call(json!({"agent_id": agent, "key": "other"}), "reject").error_code(), -32003);
    let unknown = "agt-00000000000000ff";
    let burned = approved_call(json!({"agent_id": unknown, "key": "env"}), "approve");
    assert_eq!(burned.json()["result"]["isError"], true, "{burned:?}");
    assert_eq!(s.http("POST", "/mcp", Some("tg_not_a_token"), Some("{}")).status, 401);
    assert_eq!(common::console::sign_in(&s, "reviewer", "not the password", "").status, 401);
    // An execution on the local agent, polled until it finished.
    let started = structured_as(
        &s,
        &schemas,
        &s.token,
        "execute_instruction",
        json!({"definition": "os_facts", "agent_ids": [agent]}),
    );
    let execution = started["execution_id"].as_str().unwrap().to_string();
    let (mut ready, mut not_ready) = (0.0, 0.0);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = structured_as(&s, &schemas, &s.token, "get_execution_status", json!({"execution_id": execution}));
        if status["finished"] == true {
            ready += 1.0;
            break;
        }
        not_ready += 1.0;
        assert!(Instant::now() < deadline, "{status}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let polls = ready + not_ready;

    let after = scrape(&s, metrics);
    let moved = |series: &str| after.get(series).copied().unwrap_or(0.0) - before.get(series).copied().unwrap_or(0.0);
    let expected = [
        ("toolgate_mcp_requests_total{method=\"tools/list\",outcome=\"ok\"}", 2.0),
        // set_tag, the approved recall, the burned recall (an isError result), execute, polls
        ("toolgate_mcp_requests_total{method=\"tools/call\",outcome=\"ok\"}", 4.0 + polls),
        // the tier refusal, three tickets minted, the rejected recall
        ("toolgate_mcp_requests_total{method=\"tools/call\",outcome=\"error\"}", 5.0),
        ("toolgate_mcp_denials_total{code=\"-32004\"}", 1.0),
        ("toolgate_mcp_denials_total{code=\"-32006\"}", 3.0),
        ("toolgate_mcp_denials_total{code=\"-32003\"}", 1.0),
        ("toolgate_approvals_total{tool=\"delete_tag\",event=\"minted\"}", 3.0),
        ("toolgate_approvals_total{tool=\"delete_tag\",event=\"approved\"}", 2.0),
        ("toolgate_approvals_total{tool=\"delete_tag\",event=\"rejected\"}", 1.0),
        ("toolgate_approvals_total{tool=\"delete_tag\",event=\"consumed\"}", 2.0),
        ("toolgate_approvals_total{tool=\"execute_instruction\",event=\"minted\"}", 0.0),
        // the approved recall of an unknown agent's tag: an error result, a person's approval wasted
        ("toolgate_approvals_burned_total{tool=\"delete_tag\",reason=\"failed\"}", 1.0),
        ("toolgate_approvals_burned_total{tool=\"delete_tag\",reason=\"refused\"}", 0.0),
        // the rejected ticket's recall, apart from RBAC's -32003 refusals
        ("toolgate_approval_recalls_refused_total{tool=\"delete_tag\",reason=\"rejected\"}", 1.0),
        ("toolgate_auth_failures_total", 1.0),
        ("toolgate_console_sign_ins_total{result=\"denied\"}", 1.0),
        ("toolgate_console_sign_ins_total{result=\"success\"}", 0.0),
        ("toolgate_mcp_tool_calls_total{tool=\"set_tag\",outcome=\"success\"}", 1.0),
        ("toolgate_mcp_tool_calls_total{tool=\"set_tag\",outcome=\"denied\"}", 1.0),
        ("toolgate_mcp_tool_calls_total{tool=\"delete_tag\",outcome=\"pending\"}", 3.0),
        ("toolgate_mcp_tool_calls_total{tool=\"delete_tag\",outcome=\"success\"}", 1.0),
        ("toolgate_mcp_tool_calls_total{tool=\"delete_tag\",outcome=\"denied\"}", 1.0),
        ("toolgate_mcp_tool_calls_total{tool=\"delete_tag\",outcome=\"failure\"}", 1.0),
        ("toolgate_mcp_poll_total{tool=\"get_execution_status\",result=\"ready\"}", ready),
        ("toolgate_mcp_poll_total{tool=\"get_execution_status\",result=\"not_ready\"}", not_ready),
    ];
    for (series, delta) in expected {
        assert_eq!(moved(series), delta, "{series}\nafter: {after:#?}");
    }
    // Every approval-gated tool's series exist from the start, at zero: an absent one cannot fire.
    for series in [
        "toolgate_approvals_total{tool=\"execute_instruction\",event=\"minted\"}",
        "toolgate_approvals_burned_total{tool=\"quarantine_device\",reason=\"refused\"}",
    ] {
        assert!(before.contains_key(series), "{series} is missing\nbefore: {before:#?}");
    }
    // output_schemas listed tools once before `before`; nothing else was called.
    let calls: f64 =
        after.iter().filter(|(k, _)| k.starts_with("toolgate_mcp_requests_total")).map(|(k, _)| moved(k)).sum();
    assert_eq!(calls, 2.0 + 4.0 + polls + 5.0, "no request uncounted or counted twice");
    assert!(moved("toolgate_store_seconds_count") > 0.0, "store operations are timed");
    assert_eq!(after["toolgate_agents_connected"], 1.0);
    assert_eq!(after["toolgate_agents_enrolled"], 1.0);
    assert_eq!(after["toolgate_approvals_pending"], 0.0);
    assert_eq!(after["toolgate_executions_in_flight"], 0.0);
    assert_eq!(after["toolgate_mcp_sessions_active"], 0.0);

    // On the MCP listener, /metrics takes an administrator's API token, not an MCP token.
    assert_eq!(s.http("GET", "/metrics", None, None).status, 401);
    let r = s.http("GET", "/metrics", Some(&s.token), None);
    assert_eq!((r.status, r.json()["error"].as_str()), (403, Some("mcp_token")), "{r:?}");
    let r = s.http("GET", "/metrics", Some(&api), None);
    assert_eq!(r.status, 200);
    assert!(r.body.contains("toolgate_mcp_requests_total"));
    // The metrics listener serves /metrics and nothing else.
    assert_eq!(request_to(metrics, "POST", "/mcp", &[], Some("{}")).status, 404);
}

#[test]
fn json_log_lines_carry_the_correlation_id_of_their_request() {
    let logs = tempfile::tempdir().unwrap();
    let s = start_logging_to(tempfile::tempdir().unwrap(), &["--log-format", "json"], &[], Some(logs.path()));
    // A ticket is minted (an info line inside the request).
    let r = call_as(&s, &s.token, "delete_tag", json!({"agent_id": "agt-00000000000000aa", "key": "env"}));
    let id = approval_id(&r);
    let correlation = r.header("x-correlation-id").unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    let lines: Vec<Value> = loop {
        let text = std::fs::read_to_string(logs.path().join("stderr")).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
            .collect();
        if lines.iter().any(|l| l["approval_id"] == id.as_str()) {
            break lines;
        }
        assert!(Instant::now() < deadline, "no line for {id}: {text}");
        std::thread::sleep(Duration::from_millis(50));
    };
    for line in &lines {
        assert!(line.get("correlation_id").is_some(), "every line has the key: {line}");
        assert!(line["level"].is_string() && line["timestamp"].is_string(), "{line}");
    }
    let minted = lines.iter().find(|l| l["approval_id"] == id.as_str()).unwrap();
    assert_eq!(minted["correlation_id"], correlation.as_str(), "the line names the request's correlation id");
    assert_eq!(minted["tool"], "delete_tag");
}

#[test]
fn flags_read_toolgate_variables() {
    // The kill switch the seeds document as an environment variable.
    let s = common::start_with_env(tempfile::tempdir().unwrap(), &[], &[("TOOLGATE_MCP_DISABLE", "true")]);
    assert_eq!(call_as(&s, &s.token, "list_tags", json!({})).error_code(), -32005);
    drop(s);
    // An unparsable value is refused with the variable's name, before anything starts.
    let out = std::process::Command::new(common::bin())
        .args(["serve", "--data-dir"])
        .arg(tempfile::tempdir().unwrap().path())
        .env("TOOLGATE_MAX_SESSIONS", "many")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--max-sessions") && stderr.contains("many"), "{stderr}");
    // A flag given on the command line wins over its variable.
    let s = common::start_with_env(
        tempfile::tempdir().unwrap(),
        &["--max-sessions", "1"],
        &[("TOOLGATE_MAX_SESSIONS", "1000"), ("TOOLGATE_LOG_FORMAT", "json")],
    );
    let init = |n: i64| {
        let body = json!({"jsonrpc": "2.0", "id": n, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        common::request(s.addr, "POST", &[("Authorization", &format!("Bearer {}", s.token))], Some(&body.to_string()))
    };
    assert_eq!(init(1).status, 200);
    assert_eq!(init(2).status, 429, "--max-sessions 1 beats TOOLGATE_MAX_SESSIONS=1000");
}

#[test]
fn a_backup_taken_under_load_restores_to_a_working_server() {
    let s = common::start(&[]);
    let api = common::api_credential(&s, "ops");
    let backup = tempfile::tempdir().unwrap();
    let file = backup.path().join("toolgate.sqlite");
    let data_dir = s.data_dir.path().to_path_buf();
    let backup_cli = |to: &std::path::Path| {
        std::process::Command::new(common::bin())
            .args(["backup", "--data-dir"])
            .arg(&data_dir)
            .arg("--to")
            .arg(to)
            .output()
            .unwrap()
    };
    // Calls go on (each with its audit row) while the copy is written.
    let out = std::thread::scope(|scope| {
        let load = scope.spawn(|| {
            for _ in 0..50 {
                assert_eq!(call_as(&s, &s.token, "list_tags", json!({})).status, 200);
            }
        });
        let out = backup_cli(&file);
        load.join().unwrap();
        out
    });
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("a consistent copy"));
    let again = backup_cli(&file);
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("exists"));

    // Restored into a fresh data dir: the same principals, tokens and audit log.
    let restored = tempfile::tempdir().unwrap();
    std::fs::copy(&file, restored.path().join(toolgate_store::SQLITE_FILE_NAME)).unwrap();
    std::fs::write(restored.path().join("demo-token"), &s.token).unwrap();
    let r2 = common::start_in(restored, &[]);
    assert_eq!(call_as(&r2, &s.token, "list_tags", json!({})).status, 200, "the demo token works on the copy");
    let audit = r2.http("GET", "/api/v1/audit?action=mcp.list_tags&limit=1000", Some(&api), None);
    assert_eq!(audit.status, 200, "{audit:?}");
    let rows = audit.json()["entries"].as_array().unwrap().len();
    assert!(rows <= 51, "{rows} rows: at most the calls made before the copy, plus this one");
}

/// Fidelity: the stream series the seeds' runbooks alert on exist from the start and move
/// with what happens: a session opened, a streamed execution that completes, a cancellation
/// for a request that is not in flight.
#[test]
fn stream_metrics_count_sessions_streams_and_cancellations() {
    let logs = tempfile::tempdir().unwrap();
    let extra = ["--local-agent", "--metrics-listen", "127.0.0.1:0"];
    let s = start_logging_to(tempfile::tempdir().unwrap(), &extra, &[], Some(logs.path()));
    let agent = wait_for_agents(&s, &s.token, 1).remove(0);
    let metrics = metrics_address(logs.path());
    let before = scrape(&s, metrics);
    for series in [
        "toolgate_mcp_sessions_opened_total",
        "toolgate_mcp_replay_evictions_total",
        "toolgate_mcp_streams_refused_total{reason=\"post_per_principal_cap\"}",
        "toolgate_mcp_streams_refused_total{reason=\"get_global_cap\"}",
        "toolgate_mcp_streams_closed_total{reason=\"completed\"}",
        "toolgate_mcp_streams_closed_total{reason=\"client_gone\"}",
        "toolgate_mcp_streams_closed_total{reason=\"credential_revoked\"}",
        "toolgate_mcp_cancellations_total{outcome=\"unknown\"}",
    ] {
        assert!(before.contains_key(series), "{series} is not served from the start: {before:#?}");
    }
    let auth = format!("Bearer {}", s.token);
    let session = common::initialize(&s, &s.token, json!({}));
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}});
    let headers = [
        ("Authorization", auth.as_str()),
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    assert_eq!(common::request(s.addr, "POST", &headers, Some(&cancel.to_string())).status, 202);
    let streamed = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "execute_instruction", "arguments": {"definition": "os_facts", "agent_ids": [agent]},
        "_meta": {"progressToken": "p"}}});
    let sse = [
        ("Authorization", auth.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let r = common::request(s.addr, "POST", &sse, Some(&streamed.to_string()));
    assert_eq!(r.header("content-type"), Some("text/event-stream"), "{r:?}");
    let after = scrape(&s, metrics);
    let moved = |series: &str| after.get(series).copied().unwrap_or(0.0) - before.get(series).copied().unwrap_or(0.0);
    assert_eq!(moved("toolgate_mcp_sessions_opened_total"), 1.0);
    assert_eq!(moved("toolgate_mcp_cancellations_total{outcome=\"unknown\"}"), 1.0);
    assert_eq!(moved("toolgate_mcp_streams_closed_total{reason=\"completed\"}"), 1.0, "{after:#?}");
    assert_eq!(moved("toolgate_mcp_streams_closed_total{reason=\"client_gone\"}"), 0.0);
    // And each stream's attach and close are audited, the close with its reason.
    let api = common::api_credential(&s, "admin");
    let deadline = Instant::now() + Duration::from_secs(30);
    let rows = loop {
        let rows = s.http("GET", "/api/v1/audit?action=stream.&limit=10", Some(&api), None).json();
        let found = rows["entries"].as_array().unwrap().clone();
        if found.len() >= 2 || Instant::now() > deadline {
            break found;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let actions: Vec<(&str, &str)> =
        rows.iter().map(|r| (r["action"].as_str().unwrap(), r["detail"].as_str().unwrap_or_default())).collect();
    assert!(actions.contains(&("stream.attach", "call 5")), "{actions:?}");
    assert!(actions.contains(&("stream.close", "call 5: completed")), "{actions:?}");
    assert!(rows.iter().all(|r| r["target_type"] == "McpRequest"), "a sessionless stream names its request: {rows:?}");
    // Session rows say what their target is, and a reader can ask for them by that kind.
    let sessions = s.http("GET", "/api/v1/audit?target_type=McpSession&limit=10", Some(&api), None).json();
    let sessions = sessions["entries"].as_array().unwrap();
    assert!(sessions.iter().any(|r| r["action"] == "session.open" && r["target"] == session.as_str()), "{sessions:?}");
    assert!(sessions.iter().all(|r| r["target_type"] == "McpSession"), "{sessions:?}");
}

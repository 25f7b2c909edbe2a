//! What a security and reliability probe found, one test per finding (issue "Hardening"),
//! against the real binary.

use crate::common;

use common::{Response, Server, call, call_as, request, start, start_with_agent};
use serde_json::{Value, json};

/// Finding 7: A batch is capped: a larger one is refused whole, before any of it runs.
#[test]
fn oversized_batches_are_refused_whole() {
    let s = start(&[]);
    let pings = |n: usize| -> String {
        let items: Vec<Value> = (0..n).map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "ping"})).collect();
        Value::Array(items).to_string()
    };
    let ok = s.post(&[], &pings(100));
    assert_eq!(ok.status, 200, "{ok:?}");
    assert_eq!(ok.json().as_array().map(Vec::len), Some(100));
    let refused = s.post(&[], &pings(101));
    assert_eq!((refused.status, refused.error_code()), (400, -32600), "{refused:?}");
    let message = refused.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("at most 100") && message.contains("101"), "{message}");
}

/// Finding 8: check_permission knows only the declared securables and operations.
#[test]
fn check_permission_refuses_invented_names_with_suggestions() {
    let s = start(&[]);
    let r = call_as(&s, &s.token, "check_permission", json!({"securable": "Nonexistent", "operation": "Whatever"}));
    let result = &r.json()["result"];
    assert_eq!(result["isError"], true, "invented names are an error, not `allowed`: {r:?}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("Nonexistent") && text.contains("securable"), "{text}");
    let r = call_as(&s, &s.token, "check_permission", json!({"securable": "Tags", "operation": "Raed"}));
    let text = r.json()["result"]["content"][0]["text"].as_str().unwrap().to_string();
    assert!(text.contains("did you mean `Tag`") && text.contains("did you mean `Read`"), "{text}");
    let r = call_as(&s, &s.token, "check_permission", json!({"securable": "Tag", "operation": "Read"}));
    assert_eq!(r.json()["result"]["structuredContent"]["allowed"], true, "{r:?}");
}

/// A reviewer (Administrator, other than the submitter) for the approval flow.
fn add_reviewer(s: &Server) {
    s.cli(&["principal", "add", "reviewer", "--role", "Administrator"]);
}

/// Ticket, approval by a person on the console, recall: the recall's answer.
fn approved_call(s: &Server, token: &str, tool: &str, arguments: Value) -> (Response, String) {
    let first = call_as(s, token, tool, arguments.clone());
    assert_eq!(first.error_code(), -32006, "{tool} needs approval: {first:?}");
    let id = first.json()["error"]["data"]["approval_id"].as_str().unwrap().to_string();
    s.cli(&["approvals", "approve", &id, "--as", "reviewer"]);
    let mut recall = arguments;
    recall["approval_id"] = json!(id);
    (call_as(s, token, tool, recall), id)
}

/// Finding 9: Deleting what is already gone, or revoking a revoked token, is success with
/// `changed: false`; the approved ticket it used is consumed.
#[test]
fn idempotent_no_ops_succeed_and_consume_their_ticket() {
    let (s, agent) = start_with_agent(&[]);
    add_reviewer(&s);
    let supervised = s.token("admin", "supervised", "1d");
    let cases = [
        (s.token.clone(), "delete_tag", json!({"agent_id": agent, "key": "never-set"})),
        (supervised.clone(), "delete_plugin_config", json!({"plugin": "p", "key": "never-set"})),
    ];
    for (token, tool, arguments) in cases {
        let (r, id) = approved_call(&s, &token, tool, arguments.clone());
        let result = &r.json()["result"];
        assert_eq!(result["isError"], false, "{tool}: a no-op is success: {r:?}");
        assert_eq!(result["structuredContent"]["changed"], false, "{tool}: {r:?}");
        let mut replay = arguments;
        replay["approval_id"] = json!(id);
        assert_eq!(call_as(&s, &token, tool, replay).error_code(), -32003, "{tool}: the ticket was consumed");
    }
    // Revoking twice: the second is a no-op, not an error.
    let victim = s.token("admin", "readonly", "1d");
    let listing = s.cli(&["token", "list"]);
    let victim_id = listing.lines().rfind(|l| l.contains("readonly")).unwrap().split_whitespace().next().unwrap();
    drop(victim);
    for expected_change in [true, false] {
        let (r, _) = approved_call(&s, &supervised, "revoke_api_token", json!({"token_id": victim_id}));
        let result = &r.json()["result"];
        assert_eq!(result["isError"], false, "{r:?}");
        assert_eq!(result["structuredContent"]["changed"], expected_change, "{r:?}");
    }
}

fn initialize(s: &Server, token: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    request(s.addr, "POST", &[("Authorization", &format!("Bearer {token}"))], Some(&body.to_string()))
}

/// Finding 4: sessions are capped per principal and globally; a new one is refused (429,
/// -32010, with the A4 data) instead of evicting anyone's live session.
#[test]
fn session_caps_refuse_new_sessions_and_evict_nobody() {
    let s = start(&["--max-sessions-per-principal", "3", "--max-sessions", "5"]);
    s.cli(&["principal", "add", "bob", "--role", "Viewer"]);
    let bob = s.token("bob", "readonly", "1d");
    let mut alice_sessions = Vec::new();
    for _ in 0..3 {
        let r = initialize(&s, &s.token);
        assert_eq!(r.status, 200, "{r:?}");
        alice_sessions.push(r.header("mcp-session-id").unwrap().to_string());
    }
    let refused = initialize(&s, &s.token);
    assert_eq!((refused.status, refused.error_code()), (429, -32010), "per principal: {refused:?}");
    let data = &refused.json()["error"]["data"];
    assert!(data["correlation_id"].is_string() && data["remediation"].is_string(), "A4 data: {data}");
    assert!(data.as_object().unwrap().contains_key("retry_after_ms"), "A4 data: {data}");
    for _ in 0..2 {
        assert_eq!(initialize(&s, &bob).status, 200, "bob is under his own cap");
    }
    let refused = initialize(&s, &bob);
    assert_eq!((refused.status, refused.error_code()), (429, -32010), "global: {refused:?}");
    // Nobody was evicted to make room.
    for sid in &alice_sessions {
        let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string();
        let r = s.post(&[("Mcp-Session-Id", sid), ("MCP-Protocol-Version", "2025-11-25")], &ping);
        assert_eq!(r.status, 200, "session {sid} is still live: {r:?}");
    }
}

/// Finding 6: `/healthz` stays a liveness check; `/readyz` checks that the store is writable
/// and is still the file on disk (not an unlinked one that writes vanish into).
#[test]
fn readiness_follows_the_store_file() {
    let s = start(&[]);
    let ready = s.http("GET", "/readyz", None, None);
    assert_eq!((ready.status, ready.json()["status"].as_str()), (200, Some("ready")), "{ready:?}");
    std::fs::remove_dir_all(s.data_dir.path()).unwrap();
    let not_ready = s.http("GET", "/readyz", None, None);
    assert_eq!(not_ready.status, 503, "the data directory is gone: {not_ready:?}");
    let reason = not_ready.json()["message"].as_str().unwrap().to_string();
    assert!(reason.contains("toolgate.sqlite3"), "the reason names the file: {reason}");
    assert_eq!(s.http("GET", "/healthz", None, None).status, 200, "liveness is not readiness");
}

/// Every file under `dir` (the store, its WAL, the logs) as bytes.
fn files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().filter_map(Result::ok) {
        let bytes = std::fs::read(entry.path()).unwrap_or_default();
        if bytes.windows(needle.len()).any(|w| w == needle) {
            found.push(entry.path().display().to_string());
        }
    }
    found
}

/// Finding 1: an argument the catalogue marks sensitive (`writeOnly: true`) never reaches the
/// audit log, error messages, logs or the store; and an oversized value is not echoed back.
#[test]
fn sensitive_arguments_never_reach_the_audit_log_the_store_or_the_logs() {
    let logs = tempfile::tempdir().unwrap();
    let s =
        common::start_logging_to(tempfile::tempdir().unwrap(), &[], &[("TOOLGATE_LOG", "debug")], Some(logs.path()));
    let listing = s.cli(&["token", "list"]);
    let demo_id = listing.lines().find(|l| l.contains("demo")).unwrap().split_whitespace().next().unwrap().to_string();
    let rotated = call_as(&s, &s.token, "rotate_api_token", json!({"token_id": demo_id}));
    let rotated = &rotated.json()["result"]["structuredContent"];
    let (successor, secret) = (rotated["successor_id"].as_str().unwrap(), rotated["secret"].as_str().unwrap());
    // A wrong secret (an error answer), then the right one.
    let wrong = format!("{secret}-but-wrong");
    let r = call_as(&s, &s.token, "confirm_api_token_rotation", json!({"token_id": successor, "secret": wrong}));
    assert_eq!(r.json()["result"]["isError"], true, "{r:?}");
    assert!(!r.body.contains(&wrong), "the error does not echo the secret: {r:?}");
    // An invalid one (too long for the schema): the complaint does not echo it either.
    let long = format!("{secret}{}", "x".repeat(600));
    let r = call_as(&s, &s.token, "confirm_api_token_rotation", json!({"token_id": successor, "secret": long}));
    assert!(!r.body.contains(secret), "the schema complaint does not echo the secret: {r:?}");
    let r = call_as(&s, &s.token, "confirm_api_token_rotation", json!({"token_id": successor, "secret": secret}));
    assert_eq!(r.json()["result"]["structuredContent"]["confirmed"], true, "{r:?}");
    let audit = call_as(&s, secret, "query_audit_log", json!({"limit": 1000}));
    assert!(audit.body.contains("confirm_api_token_rotation"), "the calls are audited: {audit:?}");
    assert!(!audit.body.contains(secret), "query_audit_log shows no secret");
    // An oversized value is not echoed whole in the invalid-arguments reply.
    let huge = "y".repeat(3 * 1024 * 1024);
    let r = call_as(&s, secret, "set_tag", json!({"agent_id": "a", "key": "k", "value": huge}));
    assert!(r.body.len() < 64 * 1024, "a 3 MiB argument gave a {} byte reply", r.body.len());
    assert!(r.json()["result"]["isError"] == true || r.json()["error"].is_object(), "{}", &r.body[..200]);
    let data_dir = s.stop();
    for dir in [data_dir.path(), logs.path()] {
        assert_eq!(files_containing(dir, secret.as_bytes()), Vec::<String>::new(), "the secret is in these files");
        assert_eq!(files_containing(dir, &secret.as_bytes()[3..]), Vec::<String>::new(), "nor its tail");
    }
}

/// Finding 5: a state-changing call's audit row is durable before its answer: a SIGKILL right
/// after the last answer loses none of them (repeated, as the loss was one row per run).
#[test]
fn every_answered_state_change_is_audited_across_a_crash() {
    for run in 0..3 {
        let (s, agent) = start_with_agent(&[]);
        let (addr, token) = (s.addr, s.token.clone());
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let (token, agent) = (token.clone(), agent.clone());
                std::thread::spawn(move || {
                    let mut answered = Vec::new();
                    for i in 0..25 {
                        let key = format!("k{t}-{i}");
                        let body = call("set_tag", json!({"agent_id": agent, "key": key, "value": "v"})).to_string();
                        let r = request(addr, "POST", &[("Authorization", &format!("Bearer {token}"))], Some(&body));
                        if r.json()["result"]["isError"] == false {
                            answered.push(key);
                        }
                    }
                    answered
                })
            })
            .collect();
        let mut answered: Vec<String> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
        assert_eq!(answered.len(), 200);
        // One more, and the crash the instant its answer arrives.
        let last = call_as(&s, &token, "set_tag", json!({"agent_id": agent, "key": "last", "value": "v"}));
        let dir = s.crash();
        assert_eq!(last.json()["result"]["isError"], false, "{last:?}");
        answered.push("last".into());
        let restarted = common::start_in(dir, &[]);
        let schemas = common::agents::output_schemas(&restarted);
        let audit = json!({"action": "mcp.set_tag", "limit": 1000});
        let rows = common::agents::every_page(&restarted, &schemas, "query_audit_log", audit, "entries");
        let missing: Vec<&String> = answered
            .iter()
            .filter(|key| !rows.iter().any(|r| r["target"].as_str().is_some_and(|t| t.contains(&format!("\"{key}\"")))))
            .collect();
        assert!(missing.is_empty(), "run {run}: answered calls without an audit row after SIGKILL: {missing:?}");
    }
}

fn audit_rows(s: &Server, api: &str, query: &str) -> Vec<Value> {
    let r = s.http("GET", &format!("/api/v1/audit?limit=1000&{query}"), Some(api), None);
    r.json()["entries"].as_array().unwrap_or_else(|| panic!("{r:?}")).clone()
}

/// Finding 3: failed authentications are aggregated per source address (a flood writes a
/// handful of rows, and the count is kept), and the audit log has a retention setting.
#[test]
fn authentication_failures_are_aggregated_per_source() {
    let s = start(&["--auth-failure-window", "1s"]);
    let api = common::api_credential(&s, "auditor");
    for i in 0..300 {
        let token = if i % 2 == 0 { None } else { Some("tg_not-a-token") };
        assert_eq!(s.http("POST", "/mcp", token, Some("{}")).status, 401);
    }
    // The summary of a window is written when it closes: wait for it (generously).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let counted = loop {
        let rows = audit_rows(&s, &api, "action=auth.failure");
        let counted: u64 = rows.iter().map(|r| r["detail"].as_str().and_then(failures_in).unwrap_or(1)).sum();
        if counted >= 300 || std::time::Instant::now() > deadline {
            assert!(rows.len() <= 10, "300 failures wrote {} rows", rows.len());
            assert!(rows.iter().all(|r| r["target"].as_str() == Some("127.0.0.1")), "{rows:?}");
            break counted;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(counted, 300, "every failure is counted");
}

/// "… 299 more failures …" in a summary row's detail.
fn failures_in(detail: &str) -> Option<u64> {
    let (before, _) = detail.split_once(" more ")?;
    before.rsplit(' ').next()?.parse().ok()
}

#[test]
fn audit_rows_older_than_the_retention_are_pruned() {
    let s = start(&[]);
    let api = common::api_credential(&s, "auditor");
    assert_eq!(s.http("POST", "/mcp", None, Some("{}")).status, 401);
    // The row of a failed authentication is written without the caller waiting: wait for it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while audit_rows(&s, &api, "action=auth.failure").is_empty() {
        assert!(std::time::Instant::now() < deadline, "the auth.failure row never arrived");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let dir = s.stop();
    // Two days later, with a one-day retention: the old rows are gone at start.
    let later = (2 * 86_400_000i64).to_string();
    let s = common::start_with_env(dir, &["--audit-retention", "1d"], &[("TOOLGATE_TEST_CLOCK_OFFSET_MS", &later)]);
    let rows = audit_rows(&s, &api, "action=auth.failure");
    assert!(rows.is_empty(), "rows older than a day were pruned: {rows:?}");
}

/// Reads from `stream` until the server closes it; how long that took (None: still open
/// after `limit`). Any bytes the server sent first (a 408, say) are fine.
fn closed_within(stream: &mut std::net::TcpStream, limit: std::time::Duration) -> Option<std::time::Duration> {
    use std::io::Read;
    let started = std::time::Instant::now();
    stream.set_read_timeout(Some(std::time::Duration::from_millis(200))).unwrap();
    let mut buf = [0u8; 1024];
    while started.elapsed() < limit {
        match stream.read(&mut buf) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(_) => return Some(started.elapsed()),
        }
    }
    None
}

/// Finding 2: a slowloris connection (headers trickling in), an idle keep-alive connection and
/// a body that never arrives are each closed after their timeout; connections that have not
/// authenticated are capped, so they cannot exhaust the server's file descriptors.
#[test]
fn slow_and_idle_connections_are_closed() {
    use std::io::Write;
    let s = start(&["--header-read-timeout", "1s", "--body-read-timeout", "1s"]);
    let generous = std::time::Duration::from_secs(15);
    // Slowloris: a header line every 300 ms, never the blank line that ends them.
    let mut slow = std::net::TcpStream::connect(s.addr).unwrap();
    slow.write_all(format!("POST /mcp HTTP/1.1\r\nHost: {}\r\n", s.addr).as_bytes()).unwrap();
    let trickle = {
        let mut writer = slow.try_clone().unwrap();
        std::thread::spawn(move || {
            for i in 0..40 {
                std::thread::sleep(std::time::Duration::from_millis(300));
                if writer.write_all(format!("X-Slow-{i}: y\r\n").as_bytes()).is_err() {
                    return true;
                }
            }
            false
        })
    };
    assert!(closed_within(&mut slow, generous).is_some(), "a slowloris connection is closed");
    assert!(trickle.join().unwrap(), "the server stopped taking its headers");
    // Idle: connects, sends nothing.
    let mut idle = std::net::TcpStream::connect(s.addr).unwrap();
    assert!(closed_within(&mut idle, generous).is_some(), "an idle connection is closed");
    // A body that never arrives in full.
    let mut body = std::net::TcpStream::connect(s.addr).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\"",
        s.addr, s.token
    );
    body.write_all(head.as_bytes()).unwrap();
    assert!(closed_within(&mut body, generous).is_some(), "a stalled body is given up on");
    // And the server still answers.
    assert_eq!(s.post(&[], r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).status, 200);
}

/// A TCP connection to the server from `source` (any address of 127.0.0.0/8: each is a host of
/// its own to the server's caps).
fn connect_from(s: &Server, source: &str) -> std::net::TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
        socket.connect(s.addr).await.unwrap()
    });
    let stream = stream.into_std().unwrap();
    stream.set_nonblocking(false).unwrap();
    stream
}

/// One HTTP/1.1 request on `stream`; the status line of its answer ("" when closed first).
fn status_on(stream: &mut std::net::TcpStream, method: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let request = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return String::new();
    }
    stream.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).trim().to_string()
}

#[test]
fn connections_that_have_not_authenticated_are_capped() {
    let s = start(&[
        "--max-unauthenticated-connections",
        "4",
        "--reserved-connections",
        "0",
        "--header-read-timeout",
        "2s",
    ]);
    let idle: Vec<std::net::TcpStream> = (0..4).map(|_| std::net::TcpStream::connect(s.addr).unwrap()).collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut extra = std::net::TcpStream::connect(s.addr).unwrap();
    let closed = closed_within(&mut extra, std::time::Duration::from_secs(1)).is_some();
    assert!(closed, "past the cap (no reserve), a new connection is closed at once");
    drop(idle);
    // Their places free up: an authenticated request goes through (generously waited for).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let ok = std::panic::catch_unwind(|| s.post(&[], r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).status == 200);
        if ok.unwrap_or(false) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the server never took requests again");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// Hardening round 2, MEDIUM 9: 130 idle TCP connections locked everyone out (`/healthz`, MCP,
/// agents): the cap was global. Now one address holds at most its share, and past the cap a
/// reserve still takes the probes and agents, and nothing else.
#[test]
fn idle_connections_from_one_address_lock_nobody_out_and_the_probes_keep_a_reserve() {
    let caps = [
        "--max-unauthenticated-connections",
        "4",
        "--max-unauthenticated-per-address",
        "3",
        "--reserved-connections",
        "2",
        "--header-read-timeout",
        "60s",
    ];
    let s = start(&caps);
    // One host's flood: it gets its share, then is closed at once; another host still gets in.
    let flood: Vec<std::net::TcpStream> = (0..3).map(|_| connect_from(&s, "127.0.0.2")).collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut more = connect_from(&s, "127.0.0.2");
    assert!(closed_within(&mut more, std::time::Duration::from_secs(5)).is_some(), "past its share: closed");
    let mut other = connect_from(&s, "127.0.0.3");
    assert_eq!(status_on(&mut other, "GET", "/healthz"), "HTTP/1.1 200 OK", "another host is served");
    // The general places are all taken now (3 + 1): the reserve takes a probe, refuses MCP.
    let mut probe = connect_from(&s, "127.0.0.4");
    assert_eq!(status_on(&mut probe, "GET", "/healthz"), "HTTP/1.1 200 OK", "the probe's reserve");
    let mut mcp = connect_from(&s, "127.0.0.5");
    assert_eq!(status_on(&mut mcp, "POST", "/mcp"), "HTTP/1.1 503 Service Unavailable");
    // An agent still enrolls through the reserve (its upgrade gives the place back at once).
    let states = tempfile::tempdir().unwrap();
    let token = common::agents::mint(&s, &["--uses", "1"]);
    let mut agent = common::agents::spawn_agent(&s, Some(&token), &states.path().join("a"), None);
    let deadline = std::time::Instant::now() + common::agents::PATIENCE;
    while !states.path().join("a/agent.json").exists() {
        assert!(std::time::Instant::now() < deadline, "the agent did not enroll: {}", agent.log_text());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    agent.kill();
    drop((flood, more, other, probe, mcp));
}

//! tools/call answered as Server-Sent Events: a progress token and an SSE-capable Accept, and
//! a call that reports progress before its result (an execution, on real agents). Everything
//! else keeps its plain JSON answer.

use crate::common;

use common::agents::*;
use common::sse::{events, open_stream, rest_of};
use common::{Response, Server, request, start, start_in};
use serde_json::{Value, json};

pub(crate) fn call_with(s: &Server, accept: &str, tool: &str, arguments: Value, meta: Value) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": tool, "arguments": arguments, "_meta": meta}});
    let auth = format!("Bearer {}", s.token);
    request(
        s.addr,
        "POST",
        &[("Authorization", &auth), ("MCP-Protocol-Version", "2025-11-25"), ("Accept", accept)],
        Some(&body.to_string()),
    )
}

/// The execution id a frame names.
fn execution_named_in(text: &str) -> String {
    text.split("exe-")
        .nth(1)
        .map(|r| format!("exe-{}", &r[..16]))
        .unwrap_or_else(|| panic!("no execution id in {text}"))
}

/// An execute_instruction body asking for progress.
fn followed_call(id: i64, agent_ids: &[&String]) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "execute_instruction",
        "arguments": {"definition": "os_facts", "agent_ids": agent_ids}, "_meta": {"progressToken": id}}})
    .to_string()
}

#[test]
fn an_execution_with_a_progress_token_streams_agents_responded_then_its_final_state() {
    let Fleet { s, schemas, states: _states, agents: _agents, ids: _ids } = fleet_of_three(FAST);
    let arguments = json!({"definition": "os_facts", "scope": "hostname ~ \"fleet-*\""});

    let r = call_with(
        &s,
        "application/json, text/event-stream",
        "execute_instruction",
        arguments.clone(),
        json!({"progressToken": "p-1"}),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"), "{r:?}");
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    assert_eq!(r.header("x-accel-buffering"), Some("no"));
    // Fidelity: an event stream is never sniffed into something a browser would render.
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    assert!(r.header("x-correlation-id").is_some_and(|id| id.starts_with("req-")), "{r:?}");
    let events = events(&r);
    let (progress, result) = events.split_at(events.len() - 1);
    assert!(!progress.is_empty(), "{events:?}");
    let mut last = -1.0;
    for p in progress {
        assert_eq!(p["method"], "notifications/progress", "{p}");
        assert_eq!(
            (p["params"]["progressToken"].clone(), p["params"]["total"].clone()),
            (json!("p-1"), json!(3.0)),
            "{p}"
        );
        let value = p["params"]["progress"].as_f64().unwrap();
        assert!(value > last, "progress is strictly increasing: {events:?}");
        last = value;
    }
    assert_eq!(last, 3.0, "the last progress says every agent responded: {events:?}");
    let answer = &result[0];
    assert_eq!(answer["id"], 7, "the result closes the stream: {answer}");
    let content = &answer["result"]["structuredContent"];
    assert_eq!(
        (content["finished"].clone(), content["counts"].clone()),
        (json!(true), json!({"succeeded": 3})),
        "{answer}"
    );
    // Fidelity: every progress frame names its execution in `_meta`.
    for p in progress {
        assert_eq!(p["params"]["_meta"]["toolgate/execution_id"], content["execution_id"], "{p}");
    }
    assert_eq!(content["retry_after_ms"], Value::Null);
    let validator = jsonschema::validator_for(&schemas["execute_instruction"]).unwrap();
    assert!(validator.is_valid(content), "{content}");
    // The execution is durable and readable like any other.
    let status = structured(&s, &schemas, "get_execution_status", json!({"execution_id": content["execution_id"]}));
    assert_eq!(status["counts"], json!({"succeeded": 3}));

    // A numeric token is honoured too; one of another type is no request for progress.
    let numeric = call_with(
        &s,
        "application/json, text/event-stream",
        "execute_instruction",
        arguments.clone(),
        json!({"progressToken": 42}),
    );
    assert_eq!(numeric.header("content-type"), Some("text/event-stream"));
    let ignored = call_with(
        &s,
        "application/json, text/event-stream",
        "execute_instruction",
        arguments.clone(),
        json!({"progressToken": {"x": 1}}),
    );
    assert_eq!(ignored.header("content-type"), Some("application/json"), "{ignored:?}");
    // Without SSE in Accept the token does not make a stream: the answer comes at once.
    let plain = call_with(&s, "application/json", "execute_instruction", arguments, json!({"progressToken": "p-2"}));
    assert_eq!(plain.header("content-type"), Some("application/json"));
    assert!(plain.json()["result"]["structuredContent"].get("finished").is_none(), "{plain:?}");
    // A tool that reports nothing before its result answers with its plain JSON body.
    let listed =
        call_with(&s, "application/json, text/event-stream", "list_agents", json!({}), json!({"progressToken": "p-3"}));
    assert_eq!(listed.header("content-type"), Some("application/json"), "{listed:?}");
    assert_eq!(listed.json()["result"]["structuredContent"]["total"], 3);
}

/// Fidelity (handshake era): a progress token on a POST that takes no stream, in a session,
/// gets its progress on the session's GET channel; the answer itself is plain JSON.
#[test]
fn progress_without_an_sse_accept_goes_out_on_the_sessions_get_channel() {
    let Fleet { s, schemas: _schemas, states: _states, agents: _agents, ids: _ids } = fleet_of_three(FAST);
    let sid = common::initialize(&s, &s.token, json!({}));
    let auth = format!("Bearer {}", s.token);
    let (mut channel, head) = common::sse::open_get(
        &s,
        &[("Authorization", auth.as_str()), ("Mcp-Session-Id", sid.as_str()), ("Accept", "text/event-stream")],
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let body = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "execute_instruction",
        "arguments": {"definition": "os_facts", "scope": "hostname ~ \"fleet-*\""}, "_meta": {"progressToken": "p-get"}}});
    let headers = [
        ("Authorization", auth.as_str()),
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
        ("Accept", "application/json"),
    ];
    let r = request(s.addr, "POST", &headers, Some(&body.to_string()));
    assert_eq!(r.header("content-type"), Some("application/json"), "{r:?}");
    let content = &r.json()["result"]["structuredContent"];
    let execution = content["execution_id"].as_str().unwrap().to_string();
    let seen = common::sse::read_until(&mut channel, "\"progress\":3");
    let frames: Vec<Value> = seen
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter(|f| f["method"] == "notifications/progress")
        .collect();
    assert!(!frames.is_empty(), "{seen}");
    for f in &frames {
        assert_eq!(f["params"]["progressToken"], "p-get", "{f}");
        assert_eq!(f["params"]["_meta"]["toolgate/execution_id"], execution.as_str(), "{f}");
    }
    assert_eq!(frames.last().unwrap()["params"]["progress"], 3.0, "every agent responded: {seen}");
}

#[test]
fn a_client_that_leaves_a_stream_detaches_the_execution_which_finishes_and_is_audited() {
    let Fleet { s, schemas, states: _states, agents, ids } = fleet_of_three(FAST);
    // fleet-b is stopped: the execution cannot finish while the client is there.
    agents[1].signal("-STOP");
    let auth = format!("Bearer {}", s.token);
    let headers = [("Authorization", auth.as_str()), ("MCP-Protocol-Version", "2025-11-25")];
    let (stream, seen) = open_stream(&s, &headers, &followed_call(1, &[&ids["fleet-a"], &ids["fleet-b"]]));
    assert!(seen.contains("text/event-stream") && seen.contains("notifications/progress"), "{seen}");
    let execution = execution_named_in(&seen);
    drop(stream);
    // The client is gone, fleet-b still stopped: the call stops waiting (detached) and is
    // audited once, as a success; the execution goes on.
    let deadline = std::time::Instant::now() + PATIENCE;
    let audit = loop {
        let audit = structured(&s, &schemas, "query_audit_log", json!({"action": "mcp.execute_instruction"}));
        if audit["count"] == 1 || std::time::Instant::now() > deadline {
            break audit;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(
        (audit["count"].clone(), audit["entries"][0]["result"].clone()),
        (json!(1), json!("success")),
        "{audit}"
    );
    let running = structured(&s, &schemas, "get_execution_status", json!({"execution_id": execution}));
    assert_eq!(running["finished"], false, "{running}");
    agents[1].signal("-CONT");
    let done = wait_finished(&s, &schemas, &s.token, &execution);
    assert_eq!(done["counts"], json!({"succeeded": 2}), "{done}");
}

#[test]
fn every_response_names_its_exchange_in_x_correlation_id_as_the_audit_and_a4_data_do() {
    let s = start(&[]);
    let schemas = output_schemas(&s);
    let auth = format!("Bearer {}", s.token);
    let headers = [("Authorization", auth.as_str()), ("MCP-Protocol-Version", "2025-11-25")];
    let send = |headers: &[(&str, &str)], body: Value| request(s.addr, "POST", headers, Some(&body.to_string()));
    let id_of =
        |r: &Response| r.header("x-correlation-id").unwrap_or_else(|| panic!("no X-Correlation-Id: {r:?}")).to_string();

    let listed = send(&headers, json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let unauthenticated =
        send(&[("MCP-Protocol-Version", "2025-11-25")], json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert_eq!(unauthenticated.status, 401);
    let unknown = send(
        &headers,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_agent", "arguments": {}}}),
    );
    let ids = [id_of(&listed), id_of(&unauthenticated), id_of(&unknown)];
    assert!(ids.iter().all(|i| i.starts_with("req-")), "{ids:?}");
    assert!(ids[0] != ids[1] && ids[1] != ids[2], "one id per exchange: {ids:?}");
    assert_eq!(unknown.json()["error"]["data"]["correlation_id"], ids[2], "the A4 data names the same exchange");
    // The audit row of a call carries the id its response showed.
    let called = send(
        &headers,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "list_agents", "arguments": {}}}),
    );
    let id = id_of(&called);
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let audit = structured(&s, &schemas, "query_audit_log", json!({"correlation_id": id}));
        if audit["count"] == 1 {
            assert_eq!(audit["entries"][0]["action"], "mcp.list_agents", "{audit}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no audit row for {id}: {audit}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn notifications_cancelled_detaches_a_streamed_execution_and_a_request_id_is_never_in_flight_twice() {
    let Fleet { s, schemas, states: _states, agents, ids } = fleet_of_three(FAST);
    agents[1].signal("-STOP");
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let sid = s.rpc(&[], init).header("mcp-session-id").expect("a session").to_string();
    let auth = format!("Bearer {}", s.token);
    let session_headers =
        [("Authorization", auth.as_str()), ("MCP-Protocol-Version", "2025-11-25"), ("Mcp-Session-Id", sid.as_str())];
    let call = followed_call(5, &[&ids["fleet-a"], &ids["fleet-b"]]);
    let (stream, seen) = open_stream(&s, &session_headers, &call);
    assert!(seen.contains("notifications/progress"), "{seen}");

    // The same id again in the same session, while the first is in flight: 409.
    let again = request_with(&s, &session_headers, &call);
    assert_eq!(again.status, 409, "{again:?}");
    assert!(again.json()["error"]["message"].as_str().unwrap().contains("already in flight"), "{again:?}");

    // The client cancels: the stream ends with the state so far; the execution goes on.
    let cancel =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5, "reason": "enough"}});
    assert_eq!(request_with(&s, &session_headers, &cancel.to_string()).status, 202);
    let text = rest_of(stream);
    assert!(text.contains("\"finished\":false"), "the answer says the execution is unfinished: {text}");
    let execution = execution_named_in(&text);
    agents[1].signal("-CONT");
    let done = wait_finished(&s, &schemas, &s.token, &execution);
    assert_eq!(done["counts"], json!({"succeeded": 2}), "{done}");
    // The id is free again once its call has answered.
    let reused = request_with(
        &s,
        &session_headers,
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "list_agents", "arguments": {}}})
        .to_string(),
    );
    assert_eq!(reused.status, 200, "{reused:?}");
}

fn request_with(s: &Server, headers: &[(&str, &str)], body: &str) -> Response {
    request(s.addr, "POST", headers, Some(body))
}

#[test]
fn log_lines_at_the_asked_level_stream_before_the_result_in_both_eras() {
    let Fleet { s, schemas: _, states: _states, agents: _agents, ids } = fleet_of_three(FAST);
    let auth = format!("Bearer {}", s.token);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let initialized = s.rpc(&[], init);
    assert_eq!(initialized.json()["result"]["capabilities"]["logging"], json!({}), "{initialized:?}");
    let sid = initialized.header("mcp-session-id").unwrap().to_string();
    let session = [
        ("Authorization", auth.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
        ("Mcp-Session-Id", sid.as_str()),
        ("Accept", "application/json, text/event-stream"),
    ];
    let set = |level: &str| {
        request(
            s.addr,
            "POST",
            &session,
            Some(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": level}})
                    .to_string(),
            ),
        )
    };
    let bad = set("verbose");
    assert_eq!(bad.error_code(), -32602, "{bad:?}");
    let sessionless = request(
        s.addr,
        "POST",
        &session[..2],
        Some(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "info"}}).to_string(),
        ),
    );
    assert!(sessionless.json()["error"]["message"].as_str().unwrap().contains("needs a session"), "{sessionless:?}");
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "execute_instruction",
        "arguments": {"definition": "os_facts", "agent_ids": [ids["fleet-a"]]}}})
    .to_string();

    // warning: the info line is not wanted, so nothing comes before the result: plain JSON.
    assert_eq!(set("warning").json()["result"], json!({}));
    let quiet = request(s.addr, "POST", &session, Some(&call));
    assert_eq!(quiet.header("content-type"), Some("application/json"), "{quiet:?}");
    // info: the line streams, then the result.
    assert_eq!(set("info").json()["result"], json!({}));
    let loud = request(s.addr, "POST", &session, Some(&call));
    assert_eq!(loud.header("content-type"), Some("text/event-stream"), "{loud:?}");
    let frames = events(&loud);
    assert_eq!(frames[0]["method"], "notifications/message", "{frames:?}");
    assert_eq!(frames[0]["params"]["level"], "info");
    assert!(frames[0]["params"]["data"].as_str().unwrap().contains("sent to 1 of 1 agents"), "{frames:?}");
    assert_eq!(frames.last().unwrap()["id"], 2, "{frames:?}");

    // 2026-07-28: the level rides in each request's _meta; logging/setLevel is gone.
    let modern = |level: Value| {
        let mut body = common::modern(
            3,
            "tools/call",
            json!({"name": "execute_instruction",
            "arguments": {"definition": "os_facts", "agent_ids": [ids["fleet-a"]]}}),
        );
        body["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = level;
        let mut headers = common::modern_headers("tools/call", Some("execute_instruction"));
        headers.push(("Authorization", auth.as_str()));
        headers.push(("Accept", "application/json, text/event-stream"));
        request(s.addr, "POST", &headers, Some(&body.to_string()))
    };
    let streamed = modern(json!("debug"));
    assert_eq!(streamed.header("content-type"), Some("text/event-stream"), "{streamed:?}");
    assert_eq!(events(&streamed)[0]["method"], "notifications/message");
    let refused = modern(json!("loud"));
    assert_eq!((refused.status, refused.error_code()), (400, -32602), "{refused:?}");
}

#[test]
fn a_stream_past_the_cap_is_refused_with_429_never_downgraded_and_its_place_comes_back() {
    let Fleet { s, schemas: _, states: _states, agents, ids } =
        fleet_of_three(&[FAST, &["--max-streams-per-principal", "1"]].concat());
    agents[1].signal("-STOP");
    // The first stream holds the principal's one place while fleet-b is stopped.
    let auth = format!("Bearer {}", s.token);
    let headers = [("Authorization", auth.as_str()), ("MCP-Protocol-Version", "2025-11-25")];
    let (held, seen) = open_stream(&s, &headers, &followed_call(1, &[&ids["fleet-b"]]));
    assert!(seen.contains("text/event-stream"), "{seen}");

    let refused = call_with(
        &s,
        "application/json, text/event-stream",
        "execute_instruction",
        json!({"definition": "os_facts", "agent_ids": [ids["fleet-a"]]}),
        json!({"progressToken": 2}),
    );
    assert_eq!((refused.status, refused.error_code()), (429, -32012), "{refused:?}");
    assert_eq!(refused.header("retry-after"), Some("30"), "the hint in a header too: {refused:?}");
    let data = &refused.json()["error"]["data"];
    assert!(
        data["retry_after_ms"] == 30_000 && data["remediation"].as_str().unwrap().contains("without text/event-stream"),
        "{refused:?}"
    );
    // Without SSE the same call is answered at once.
    let plain = call_with(
        &s,
        "application/json",
        "execute_instruction",
        json!({"definition": "os_facts", "agent_ids": [ids["fleet-a"]]}),
        json!({"progressToken": 3}),
    );
    assert_eq!(plain.status, 200, "{plain:?}");
    // The first call ends (fleet-b resumes): its place comes back.
    agents[1].signal("-CONT");
    rest_of(held);
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let again = call_with(
            &s,
            "application/json, text/event-stream",
            "execute_instruction",
            json!({"definition": "os_facts", "agent_ids": [ids["fleet-a"]]}),
            json!({"progressToken": 4}),
        );
        if again.status == 200 {
            assert_eq!(again.header("content-type"), Some("text/event-stream"));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the place never came back: {again:?}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn stopping_the_server_ends_a_followed_stream_at_once_and_the_execution_survives_the_restart() {
    let Fleet { s, schemas, states: _states, agents, ids } = fleet_of_three(FAST);
    agents[1].signal("-STOP");
    let auth = format!("Bearer {}", s.token);
    let headers = [("Authorization", auth.as_str()), ("MCP-Protocol-Version", "2025-11-25")];
    let (stream, seen) = open_stream(&s, &headers, &followed_call(1, &[&ids["fleet-a"], &ids["fleet-b"]]));
    let execution = execution_named_in(&seen);
    let reader = std::thread::spawn(move || rest_of(stream));
    // SIGTERM: the stream answers with the state so far instead of following for two minutes.
    let addr = s.addr.to_string();
    let stopping = std::time::Instant::now();
    let dir = s.stop();
    assert!(
        stopping.elapsed() < std::time::Duration::from_secs(100),
        "the stream held the exit: {:?}",
        stopping.elapsed()
    );
    let rest = reader.join().unwrap();
    assert!(rest.contains("\"finished\":false"), "{rest}");
    // The execution is durable: after the restart, fleet-b gets it when it comes back.
    let s = start_in(dir, &[FAST, &["--listen", &addr]].concat());
    agents[1].signal("-CONT");
    let done = wait_finished(&s, &schemas, &s.token, &execution);
    assert_eq!(done["counts"], json!({"succeeded": 2}), "{done}");
}

#[test]
fn a_stream_whose_credential_is_revoked_ends_within_seconds_and_its_call_is_still_audited() {
    let Fleet { s, schemas, states: _states, agents, ids } = fleet_of_three(FAST);
    agents[1].signal("-STOP");
    s.cli(&["principal", "add", "streamer", "--role", "Operator"]);
    let doomed = s.token("streamer", "operator", "1h");
    let listing = s.cli(&["token", "list"]);
    let id = listing.lines().find(|l| l.contains("streamer")).unwrap().split_whitespace().next().unwrap().to_string();
    let auth = format!("Bearer {doomed}");
    let headers = [("Authorization", auth.as_str()), ("MCP-Protocol-Version", "2025-11-25")];
    let (stream, seen) = open_stream(&s, &headers, &followed_call(1, &[&ids["fleet-a"], &ids["fleet-b"]]));
    let execution = execution_named_in(&seen);
    s.cli(&["token", "revoke", &id]);
    let rest = rest_of(stream);
    assert!(rest.contains("notifications/toolgate/stream_closed") && rest.contains("credential_revoked"), "{rest}");
    // Fidelity: the close frame carries the whole envelope, the opening exchange's id first.
    let close: Value = rest
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|v| v["method"] == "notifications/toolgate/stream_closed")
        .expect("a close frame");
    assert!(close["params"]["correlation_id"].as_str().is_some_and(|c| c.starts_with("req-")), "{close}");
    assert_eq!(close["params"]["retry_after_ms"], Value::Null, "{close}");
    assert!(close["params"]["remediation"].as_str().is_some(), "{close}");
    assert!(!rest.contains("\"result\""), "a revoked credential hears nothing more of the call: {rest}");
    // The call itself ended (detached) and was audited; the execution goes on.
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let audit = structured(&s, &schemas, "query_audit_log", json!({"action": "mcp.execute_instruction"}));
        if audit["count"] == 1 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the call was never audited: {audit}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    agents[1].signal("-CONT");
    let done = wait_finished(&s, &schemas, &s.token, &execution);
    assert_eq!(done["counts"], json!({"succeeded": 2}), "{done}");
}

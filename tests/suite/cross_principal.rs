//! What one principal started does not exist for another: two teams (six real agents, two
//! groups), alice's execution, task and session, and bob asking for each. Every answer is
//! the one an unknown id gets, word for word but for the id.

use crate::common;

use std::time::{Duration, Instant};

use common::agents::*;
use common::teams::{rpc_as, two_teams};
use common::{MODERN, Response, Server, call_as, initialize, modern_headers, request};
use serde_json::{Value, json};

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A 2026-07-28 request with the tasks extension.
fn modern(s: &Server, token: &str, method: &str, name: Option<&str>, mut params: Value) -> Response {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
    });
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": method, "params": params});
    let auth = format!("Bearer {token}");
    let mut headers = modern_headers(method, name);
    headers.push(("Authorization", &auth));
    request(s.addr, "POST", &headers, Some(&body.to_string()))
}

/// The text of a tool's error result, or of a JSON-RPC error.
fn said(answer: &Value) -> String {
    match answer.get("error") {
        Some(error) => format!("{} {}", error["code"], error["message"]),
        None => {
            assert_eq!(answer["result"]["isError"], true, "expected a refusal: {answer}");
            answer["result"]["content"][0]["text"].as_str().unwrap().to_string()
        }
    }
}

/// `ask(id)` for another's id answers exactly as `ask` for an id nobody has, but for the id.
fn reads_as_unknown(what: &str, theirs: &str, nobodys: &str, ask: impl Fn(&str) -> Value) {
    let (for_theirs, for_nobodys) = (said(&ask(theirs)), said(&ask(nobodys)));
    assert_eq!(for_theirs.replace(theirs, "ID"), for_nobodys.replace(nobodys, "ID"), "{what}");
}

#[test]
fn another_principals_executions_tasks_and_sessions_read_as_unknown() {
    if !is_root() {
        eprintln!("skipped: the agents need their own hostnames (UTS namespaces), which needs root");
        return;
    }
    let t = two_teams();
    let (s, schemas) = (&t.s, &t.schemas);
    let (alice, bob) = (&t.tokens[&'a'], &t.tokens[&'b']);
    let started = structured_as(
        s,
        schemas,
        alice,
        "execute_instruction",
        json!({"definition": "os_facts", "scope": "agent_id exists"}),
    );
    let execution = started["execution_id"].as_str().unwrap().to_string();
    wait_finished(s, schemas, alice, &execution);
    let unknown_execution = "exe-00000000000000000000000000";

    // Executions, their responses and bundles.
    for (tool, extra) in [
        ("get_execution_status", json!({})),
        ("query_responses", json!({})),
        ("aggregate_responses", json!({"group_by": "hostname"})),
        ("get_bundle_result", json!({})),
        ("cancel_execution", json!({})),
    ] {
        let key = if tool == "get_bundle_result" { "bundle_id" } else { "execution_id" };
        reads_as_unknown(tool, &execution, unknown_execution, |id| {
            let mut arguments = extra.clone();
            arguments[key] = json!(id);
            call_as(s, bob, tool, arguments).json()
        });
    }
    let listed = structured_as(s, schemas, bob, "list_executions", json!({}));
    assert!(listed["executions"].as_array().unwrap().iter().all(|e| e["execution_id"] != json!(execution)), "{listed}");
    reads_as_unknown("execution://", &execution, unknown_execution, |id| {
        rpc_as(s, bob, "resources/read", json!({"uri": format!("execution://{id}")}))
    });
    let offered = |token: &str| {
        rpc_as(s, token, "completion/complete", json!({"ref": {"type": "ref/resource", "uri": "execution://{execution_id}"}, "argument": {"name": "execution_id", "value": ""}}))
            ["result"]["completion"]["values"]
            .clone()
    };
    assert_eq!(offered(alice), json!([execution]), "alice is offered her own");
    assert_eq!(offered(bob), json!([]), "bob is not offered alice's");

    // Tasks: alice's task does not exist for bob.
    let agents: Vec<String> = t.of('a').into_iter().collect();
    let call = json!({"name": "execute_instruction", "arguments": {"definition": "os_facts", "agent_ids": agents}});
    let created = modern(s, alice, "tools/call", Some("execute_instruction"), call).json();
    let task = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {created}")).to_string();
    for method in ["tasks/get", "tasks/cancel"] {
        reads_as_unknown(method, &task, "tsk-00000000000000000000000000", |id| {
            modern(s, bob, method, Some(id), json!({"taskId": id})).json()
        });
    }
    let deadline = Instant::now() + PATIENCE;
    while modern(s, alice, "tasks/get", Some(&task), json!({"taskId": task})).json()["result"]["status"] != "completed"
    {
        assert!(Instant::now() < deadline, "alice's task did not complete");
        std::thread::sleep(Duration::from_millis(200));
    }

    // Sessions: alice's GET channel, with or without a Last-Event-ID, is not bob's.
    let session = initialize(s, alice, json!({}));
    for last_event in [None, Some("1")] {
        let get = |token: &str, id: &str| {
            let auth = format!("Bearer {token}");
            let mut headers =
                vec![("Authorization", auth.as_str()), ("Mcp-Session-Id", id), ("Accept", "text/event-stream")];
            if let Some(last) = last_event {
                headers.push(("Last-Event-ID", last));
            }
            let r = request(s.addr, "GET", &headers, None);
            (r.status, r.json()["error"]["code"].clone())
        };
        assert_eq!(
            get(bob, &session),
            get(bob, "00000000-0000-0000-0000-000000000000"),
            "another's session is unknown"
        );
    }

    // Nor can bob follow alice's execution: subscribing reads it first.
    let bobs = initialize(s, bob, json!({}));
    reads_as_unknown("resources/subscribe", &execution, unknown_execution, |id| {
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": "resources/subscribe", "params": {"uri": format!("execution://{id}")}});
        let auth = format!("Bearer {bob}");
        let headers = [
            ("Authorization", auth.as_str()),
            ("Mcp-Session-Id", bobs.as_str()),
            ("MCP-Protocol-Version", "2025-11-25"),
        ];
        request(s.addr, "POST", &headers, Some(&body.to_string())).json()
    });
    // Nor listen to it (2026-07-28): the acknowledgement leaves it out, as it leaves out one
    // that does not exist.
    for target in [execution.as_str(), unknown_execution] {
        let uri = format!("execution://{target}");
        let body =
            common::modern(10, "subscriptions/listen", json!({"notifications": {"resourceSubscriptions": [uri]}}));
        let auth = format!("Bearer {bob}");
        let headers = [
            ("Authorization", auth.as_str()),
            ("MCP-Protocol-Version", MODERN),
            ("Mcp-Method", "subscriptions/listen"),
        ];
        let (mut stream, first) = common::sse::open_stream(s, &headers, &body.to_string());
        let acknowledged = match first.contains("acknowledged") {
            true => first,
            false => common::sse::read_until(&mut stream, "subscriptions/acknowledged"),
        };
        assert!(acknowledged.contains(r#""resourceSubscriptions":[]"#), "{target}: {acknowledged}");
    }

    // An approval's status_url: alice's ticket is not bob's to read.
    let supervised = s.token("alice", "supervised", "1d");
    let ticket = approval_id(&call_as(
        s,
        &supervised,
        "execute_instruction",
        json!({"definition": "os_facts", "agent_ids": [agents[0]]}),
    ));
    reads_as_unknown("status_url", &ticket, "apr-00000000000000000000000000", |id| {
        let r = common::request_to(
            s.addr,
            "GET",
            &format!("/api/v1/approvals/{id}"),
            &[("Authorization", &format!("Bearer {bob}"))],
            None,
        );
        json!({"error": {"code": r.status, "message": r.json()["error"]["message"]}})
    });
}

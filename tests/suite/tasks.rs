//! The 2026-07-28 tasks extension on the shipped catalogue: an execution started by a client
//! that negotiated `io.modelcontextprotocol/tasks` is a task it polls with `tasks/get` until
//! the real agents have answered; tasks/* without the extension, or another principal's task,
//! are refused clearly.

use crate::common;

use std::time::Instant;

use common::agents::*;
use common::{MODERN, Response, Server, modern_headers, request};
use serde_json::{Value, json};

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A 2026-07-28 request with the extension (or not) in its capabilities.
fn modern(s: &Server, token: &str, method: &str, name: Option<&str>, mut params: Value, tasks: bool) -> Response {
    let capabilities = if tasks { json!({"extensions": {TASKS: {}}}) } else { json!({}) };
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": method, "params": params});
    let auth = format!("Bearer {token}");
    let mut headers = modern_headers(method, name);
    headers.push(("Authorization", &auth));
    request(s.addr, "POST", &headers, Some(&body.to_string()))
}

#[test]
fn an_execution_is_a_task_the_client_polls_until_every_agent_answered() {
    let Fleet { s, schemas: _, states: _states, agents: _agents, ids } = fleet_of_three(FAST);
    let agent_ids: Vec<&String> = ids.values().collect();
    let arguments = json!({"definition": "os_facts", "agent_ids": agent_ids});
    let call = json!({"name": "execute_instruction", "arguments": arguments});

    let created = modern(&s, &s.token, "tools/call", Some("execute_instruction"), call.clone(), true).json();
    let task = &created["result"];
    assert_eq!(task["resultType"], "task", "{created}");
    assert!(task.get("requestState").is_none() && task.get("result").is_none(), "{created}");
    let task_id = task["taskId"].as_str().unwrap().to_string();
    assert!(task["ttlMs"].is_u64() && task["pollIntervalMs"].is_u64(), "{created}");

    let deadline = Instant::now() + PATIENCE;
    let done = loop {
        let got = modern(&s, &s.token, "tasks/get", Some(&task_id), json!({"taskId": task_id}), true).json();
        let status = got["result"]["status"].as_str().unwrap_or_default().to_string();
        if status == "completed" {
            break got;
        }
        assert!(["working", "input_required"].contains(&status.as_str()), "{got}");
        assert!(Instant::now() < deadline, "the task did not finish: {got}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let result = &done["result"]["result"]["structuredContent"];
    assert_eq!(result["finished"], true, "the task waited for every agent: {done}");
    assert_eq!(result["counts"]["succeeded"], 3, "{done}");
    assert!(result["execution_id"].as_str().unwrap().starts_with("exe-"));

    // Without the extension the same call answers at once, as before.
    let plain = modern(&s, &s.token, "tools/call", Some("execute_instruction"), call, false).json();
    assert_eq!(plain["result"]["resultType"], "complete", "{plain}");
    assert!(plain["result"]["structuredContent"]["execution_id"].is_string());

    // tasks/* need the extension; another principal's task reads as unknown.
    let refused = modern(&s, &s.token, "tasks/get", Some(&task_id), json!({"taskId": task_id}), false);
    assert_eq!((refused.status, refused.error_code()), (400, -32021), "{refused:?}");
    assert_eq!(refused.json()["error"]["data"]["requiredCapabilities"]["extensions"][TASKS], json!({}));
    s.cli(&["principal", "add", "eve", "--role", "Operator"]);
    let eve = s.token("eve", "operator", "1d");
    let foreign = modern(&s, &eve, "tasks/get", Some(&task_id), json!({"taskId": task_id}), true);
    assert_eq!(foreign.error_code(), -32602, "{foreign:?}");
    let cancel = modern(&s, &eve, "tasks/cancel", Some(&task_id), json!({"taskId": task_id}), true);
    assert_eq!(cancel.error_code(), -32602, "nobody cancels another principal's task: {cancel:?}");
    let wrong_name = modern(&s, &s.token, "tasks/get", Some("tsk-other"), json!({"taskId": task_id}), true);
    assert_eq!((wrong_name.status, wrong_name.error_code()), (400, -32020), "Mcp-Name must be the taskId");
}

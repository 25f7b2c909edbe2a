//! What a security and reliability probe found, one test per finding (issue "Hardening"),
//! against the real binary.

mod common;

use common::{Response, Server, request, start};
use serde_json::{Value, json};

fn call(name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

fn call_as(s: &Server, token: &str, name: &str, arguments: Value) -> Response {
    request(
        s.addr,
        "POST",
        &[("Authorization", &format!("Bearer {token}")), ("MCP-Protocol-Version", "2025-11-25")],
        Some(&call(name, arguments).to_string()),
    )
}

/// 7. A batch is capped: a larger one is refused whole, before any of it runs.
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

/// 8. check_permission knows only the declared securables and operations.
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

//! `--mcp-no-streaming`, for a deployment behind a proxy that buffers responses: plain JSON
//! answers only, no session minted, GET and DELETE 405; the Host and Origin checks stay on;
//! progress comes only in the final result; a confirm-gated call that would need a stream is
//! refused with the switch named (2026-07-28 still confirms, with plain JSON).

use crate::common;

use common::{MODERN, modern_headers, request, start_with_agent};
use serde_json::{Value, json};

#[test]
fn behind_a_buffering_proxy_everything_is_plain_json() {
    let (s, agent) = start_with_agent(&["--mcp-no-streaming"]);
    let auth = format!("Bearer {}", s.token);
    // initialize answers without a session, and offers nothing that lives in one.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t", "version": "1"}}});
    let r = request(s.addr, "POST", &[("Authorization", &auth)], Some(&body.to_string()));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("mcp-session-id"), None, "no session is minted: {r:?}");
    let capabilities = &r.json()["result"]["capabilities"];
    assert_eq!(capabilities["resources"]["subscribe"], false, "{capabilities}");
    assert!(capabilities.get("logging").is_none(), "{capabilities}");
    // GET and DELETE are 405, with what to do instead.
    for method in ["GET", "DELETE"] {
        let headers = [("Authorization", auth.as_str()), ("Accept", "text/event-stream"), ("Mcp-Session-Id", "x")];
        let r = request(s.addr, method, &headers, None);
        assert_eq!((r.status, r.header("allow")), (405, Some("POST")), "{method}: {r:?}");
        assert!(r.body.contains("--mcp-no-streaming"), "{method}: {}", r.body);
    }
    // The Origin check stays on.
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string();
    let foreign = request(s.addr, "POST", &[("Authorization", &auth), ("Origin", "https://evil.example")], Some(&ping));
    assert_eq!(foreign.status, 403, "{foreign:?}");
    // A call asking for progress waits and answers plain JSON, its final state inside.
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "execute_instruction",
        "arguments": {"definition": "os_facts", "agent_ids": [agent]}, "_meta": {"progressToken": "p"}}});
    let headers = [
        ("Authorization", auth.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let r = request(s.addr, "POST", &headers, Some(&body.to_string()));
    assert_eq!(r.header("content-type"), Some("application/json"), "{r:?}");
    let content = &r.json()["result"]["structuredContent"];
    assert_eq!((&content["finished"], &content["counts"]), (&json!(true), &json!({"succeeded": 1})), "{content}");

    // A confirm-gated call (supervised: PluginConfig:Write) in the handshake era: refused,
    // nothing done, the switch named.
    let supervised = s.token("admin", "supervised", "1d");
    let set = json!({"plugin": "sync", "key": "interval", "value": "45"});
    let refused = common::call_as(&s, &supervised, "set_plugin_config", set.clone()).json();
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let text = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("--mcp-no-streaming") && text.contains("Nothing was changed"), "{text}");
    let stored =
        common::call_as(&s, &s.token, "get_plugin_config", json!({"plugin": "sync", "key": "interval"})).json();
    assert_eq!(stored["result"]["structuredContent"]["value"], Value::Null, "{stored}");
    // 2026-07-28 confirms with an input_required result: plain JSON, so it still works.
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "set_plugin_config",
        "arguments": set, "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}}});
    let bearer = format!("Bearer {supervised}");
    let mut headers = modern_headers("tools/call", Some("set_plugin_config"));
    headers.push(("Authorization", &bearer));
    let modern = request(s.addr, "POST", &headers, Some(&body.to_string())).json();
    assert_eq!(modern["result"]["resultType"], "input_required", "{modern}");
}

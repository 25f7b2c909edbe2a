//! policy.yaml `confirm` (supervised: PluginConfig:Write): the call runs only once the
//! client's own user says yes, asked through elicitation on the call's stream (handshake
//! era) or through `input_required` with a signed, single-use `requestState` (2026-07-28).

use crate::common;

use common::sse::{event_with, open_stream, read_through, rest_of};
use common::{MODERN, Response, Server, modern_headers, request, start};
use serde_json::{Value, json};

const SET: &str = "set_plugin_config";

fn set_args(value: &str) -> Value {
    json!({"plugin": "sync", "key": "interval", "value": value})
}

fn supervised(s: &Server) -> String {
    s.token("admin", "supervised", "1d")
}

/// The stored value of sync/interval, read with a token that needs no confirmation to read.
fn stored_interval(s: &Server) -> Value {
    let r = common::call_as(s, &s.token, "get_plugin_config", json!({"plugin": "sync", "key": "interval"})).json();
    r["result"]["structuredContent"]["value"].clone()
}

/// Calls `set_plugin_config` in a session, answers the elicitation with `answer`, and returns
/// the question and the call's final JSON-RPC response.
fn confirm_in_session(s: &Server, answer: Value, value: &str) -> (Value, Value) {
    let token = supervised(s);
    let sid = common::initialize(s, &token, json!({"elicitation": {}}));
    let auth = format!("Bearer {token}");
    let headers =
        [("Authorization", auth.as_str()), ("Mcp-Session-Id", sid.as_str()), ("MCP-Protocol-Version", "2025-11-25")];
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": SET, "arguments": set_args(value)}});
    let (mut stream, first) = open_stream(s, &headers, &body.to_string());
    assert!(first.contains("text/event-stream"), "a question goes out on a stream: {first}");
    let first = read_through(&mut stream, first, "elicitation/create");
    let (_, question) = event_with(&first, "elicitation/create");
    let reply = json!({"jsonrpc": "2.0", "id": question["id"], "result": answer});
    let posted = request(s.addr, "POST", &headers, Some(&reply.to_string()));
    assert_eq!(posted.status, 202, "{posted:?}");
    let rest = first + &rest_of(stream);
    (question, event_with(&rest, "\"id\":9").1)
}

#[test]
fn a_handshake_client_is_asked_on_the_stream_and_only_yes_runs_the_call() {
    let s = start(&[]);
    let (question, answered) =
        confirm_in_session(&s, json!({"action": "accept", "content": {"toolgate_confirm": true}}), "30");
    let message = question["params"]["message"].as_str().unwrap();
    assert!(
        message.contains(SET) && message.contains("\"value\":\"30\""),
        "the question names the exact call: {message}"
    );
    assert!(question["params"].get("mode").is_none(), "form mode is implicit before 2026-07-28: {question}");
    assert_eq!(question["params"]["requestedSchema"]["required"], json!(["toolgate_confirm"]));
    assert_eq!(answered["result"]["isError"], false, "{answered}");
    assert_eq!(stored_interval(&s), "30");

    let (_, declined) = confirm_in_session(&s, json!({"action": "decline"}), "60");
    assert_eq!(declined["result"]["isError"], true, "{declined}");
    assert!(declined["result"]["content"][0]["text"].as_str().unwrap().contains("Nothing was changed"));
    let (_, unticked) =
        confirm_in_session(&s, json!({"action": "accept", "content": {"toolgate_confirm": false}}), "60");
    assert_eq!(unticked["result"]["isError"], true, "accepting the form without the box is a no: {unticked}");
    assert_eq!(stored_interval(&s), "30", "declined calls changed nothing");

    // A session whose client cannot answer gets a result saying so; nothing runs.
    let token = supervised(&s);
    let sid = common::initialize(&s, &token, json!({}));
    let auth = format!("Bearer {token}");
    let headers =
        [("Authorization", auth.as_str()), ("Mcp-Session-Id", sid.as_str()), ("MCP-Protocol-Version", "2025-11-25")];
    let r = request(s.addr, "POST", &headers, Some(&common::call(SET, set_args("90")).to_string())).json();
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(r["result"]["content"][0]["text"].as_str().unwrap().contains("`elicitation` capability"), "{r}");
    assert_eq!(stored_interval(&s), "30");

    let api = common::api_credential(&s, "auditor");
    let audit = s.http("GET", "/api/v1/audit?action=mcp.set_plugin_config&limit=20", Some(&api), None).body;
    assert!(audit.contains("confirmed by the client's user"), "the run is audited as confirmed: {audit}");
    assert!(audit.contains("not confirmed by the client's user (decline)"), "{audit}");
}

/// A 2026-07-28 tools/call of `set_plugin_config` with the given extra params.
fn modern_call(s: &Server, token: &str, capabilities: Value, value: &str, extra: Value) -> Response {
    let mut params = json!({"name": SET, "arguments": set_args(value)});
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params});
    let auth = format!("Bearer {token}");
    let mut headers = modern_headers("tools/call", Some(SET));
    headers.push(("Authorization", &auth));
    request(s.addr, "POST", &headers, Some(&body.to_string()))
}

#[test]
fn a_stateless_client_confirms_through_input_required_with_a_signed_single_use_state() {
    let s = start(&[]);
    let token = supervised(&s);
    let caps = json!({"elicitation": {}});
    let yes = json!({"toolgate_confirm": {"action": "accept", "content": {"toolgate_confirm": true}}});

    let first = modern_call(&s, &token, caps.clone(), "45", json!({})).json();
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    assert_eq!(result["inputRequests"]["toolgate_confirm"]["method"], "elicitation/create");
    assert!(result.get("ttlMs").is_none(), "an input_required result is never cacheable");
    let state = result["requestState"].as_str().unwrap().to_string();
    assert_eq!(stored_interval(&s), Value::Null, "asking ran nothing");

    // A yes the client filled in without the server's state is a question again, not a yes.
    let prefilled = modern_call(&s, &token, caps.clone(), "45", json!({"inputResponses": yes})).json();
    assert_eq!(prefilled["result"]["resultType"], "input_required", "{prefilled}");
    assert_eq!(stored_interval(&s), Value::Null);

    // The state is bound to the arguments: the same yes for another value is refused.
    let other = modern_call(&s, &token, caps.clone(), "99", json!({"inputResponses": yes, "requestState": state}));
    assert_eq!((other.status, other.error_code()), (400, -32602), "{other:?}");
    // ...and to the principal.
    s.cli(&["principal", "add", "mallory", "--role", "Administrator"]);
    let mallory = s.token("mallory", "supervised", "1d");
    let stolen = modern_call(&s, &mallory, caps.clone(), "45", json!({"inputResponses": yes, "requestState": state}));
    assert_eq!(stolen.error_code(), -32602, "{stolen:?}");
    // Those refusals did not spend it (they failed before its nonce was taken).
    let tampered = format!("{state}x");
    let forged = modern_call(&s, &token, caps.clone(), "45", json!({"inputResponses": yes, "requestState": tampered}));
    assert_eq!(forged.error_code(), -32602, "{forged:?}");
    assert!(forged.json()["error"]["message"].as_str().unwrap().contains("invalid requestState"));

    let done =
        modern_call(&s, &token, caps.clone(), "45", json!({"inputResponses": yes, "requestState": state})).json();
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(stored_interval(&s), "45");
    let again = modern_call(&s, &token, caps.clone(), "45", json!({"inputResponses": yes, "requestState": state}));
    assert_eq!(again.error_code(), -32602, "a state is good once: {again:?}");
    assert!(again.json()["error"]["message"].as_str().unwrap().contains("already used"));

    // A client that cannot be asked is told which capability the call needs.
    let blind = modern_call(&s, &token, json!({}), "45", json!({}));
    assert_eq!((blind.status, blind.error_code()), (400, -32021), "{blind:?}");
    assert_eq!(blind.json()["error"]["data"]["requiredCapabilities"], json!({"elicitation": {}}));
    // Malformed retries are protocol errors.
    let null = modern_call(&s, &token, caps, "45", json!({"inputResponses": null}));
    assert_eq!(null.error_code(), -32602, "{null:?}");
}

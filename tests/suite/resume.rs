//! The handshake era's GET: a session's channel (a newer GET takes it over), and the way back
//! into a dropped stream with `Last-Event-ID`, or a clear end of the session when the frames
//! are gone. The streamed call here is a confirm-kind one (supervised `set_plugin_config`):
//! its question goes out on the stream, so the test controls when the call ends.

use crate::common;

use common::sse::{event_with, open_get, open_stream, read_through, read_until};
use common::{Server, request, start};
use serde_json::json;

struct Session {
    auth: String,
    sid: String,
}

impl Session {
    fn new(s: &Server) -> Self {
        let token = s.token("admin", "supervised", "1d");
        let sid = common::initialize(s, &token, json!({"elicitation": {}}));
        Self { auth: format!("Bearer {token}"), sid }
    }

    fn headers(&self) -> Vec<(&str, &str)> {
        vec![("Authorization", &self.auth), ("Mcp-Session-Id", &self.sid), ("MCP-Protocol-Version", "2025-11-25")]
    }

    fn get(&self, s: &Server, last_event_id: Option<&str>) -> (std::net::TcpStream, String) {
        let mut headers = self.headers();
        headers.push(("Accept", "text/event-stream"));
        if let Some(id) = last_event_id {
            headers.push(("Last-Event-ID", id));
        }
        open_get(s, &headers)
    }
}

#[test]
fn a_dropped_stream_resumes_with_last_event_id_and_collects_its_result() {
    let s = start(&[]);
    let session = Session::new(&s);
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "set_plugin_config", "arguments": {"plugin": "sync", "key": "interval", "value": "15"}}});
    let (mut stream, first) = open_stream(&s, &session.headers(), &call.to_string());
    let seen = read_through(&mut stream, first, "elicitation/create");
    assert!(seen.contains("retry: "), "2025-11-25 streams open with a priming event: {seen}");
    let (question_id, question) = event_with(&seen, "elicitation/create");
    assert!(question_id.contains('-'), "every frame of a session stream has an id: {seen}");
    drop(stream); // the connection drops; the call waits for its answer all the same

    let answer = json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"toolgate_confirm": true}}});
    assert_eq!(request(s.addr, "POST", &session.headers(), Some(&answer.to_string())).status, 202);
    let (mut resumed, head) = session.get(&s, Some(&question_id));
    assert!(head.starts_with("HTTP/1.1 200") && head.contains("text/event-stream"), "{head}");
    // The first read may hold the frames already (the result is buffered): count it in.
    let rest = read_through(&mut resumed, head.clone(), "\"id\":9");
    let (_, result) = event_with(&rest, "\"id\":9");
    assert_eq!(result["result"]["isError"], false, "the buffered result, after the cursor: {rest}");
    assert!(!rest.contains("elicitation/create"), "nothing at or before the cursor is sent again: {rest}");
    let stored = common::call_as(&s, &s.token, "get_plugin_config", json!({"plugin": "sync", "key": "interval"}));
    assert_eq!(stored.json()["result"]["structuredContent"]["value"], "15");

    // A resume from the result itself has nothing to wait for: the answer ends at once.
    let (result_id, _) = event_with(&rest, "\"id\":9");
    let started = std::time::Instant::now();
    let (mut again, head) = session.get(&s, Some(&result_id));
    let tail = read_until(&mut again, "never sent");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(!tail.contains("data: {"), "nothing after the last frame: {tail}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "the stream ended instead of waiting");
}

#[test]
fn a_cursor_the_ring_no_longer_holds_ends_the_session() {
    let s = start(&[]);
    let session = Session::new(&s);
    let (_, head) = session.get(&s, Some("999-0"));
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    let body = head.split("\r\n\r\n").nth(1).unwrap_or_default().to_string();
    assert!(head.contains("Replay window exceeded") || body.contains("Replay window exceeded"), "{head}");
    assert!(head.contains("-32007"), "{head}");
    let after = request(s.addr, "POST", &session.headers(), Some(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#));
    assert_eq!((after.status, after.error_code()), (404, -32007), "the session is gone: {after:?}");
}

#[test]
fn a_second_get_takes_the_channel_over_and_delete_ends_it() {
    let s = start(&[]);
    let session = Session::new(&s);
    let (mut first, head) = session.get(&s, None);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(read_until(&mut first, "still valid").contains("still valid"), "heartbeats keep the channel alive");
    let (mut second, _) = session.get(&s, None);
    let ended = read_until(&mut first, "superseded");
    assert!(ended.contains("notifications/toolgate/stream_closed") && ended.contains("superseded"), "{ended}");
    let auth = session.auth.clone();
    let delete = [("Authorization", auth.as_str()), ("Mcp-Session-Id", session.sid.as_str())];
    assert_eq!(request(s.addr, "DELETE", &delete, None).status, 200);
    let closed = read_until(&mut second, "session_terminated");
    assert!(closed.contains("session_terminated"), "{closed}");
}

#[test]
fn a_get_that_cannot_be_a_stream_says_why() {
    let s = start(&[]);
    let session = Session::new(&s);
    let auth = session.auth.clone();
    let get = |headers: &[(&str, &str)]| {
        let mut all = vec![("Authorization", auth.as_str())];
        all.extend_from_slice(headers);
        request(s.addr, "GET", &all, None)
    };
    let sse = ("Accept", "text/event-stream");
    let no_session = get(&[sse]);
    assert_eq!((no_session.status, no_session.error_code()), (400, -32600), "{no_session:?}");
    let unknown = get(&[sse, ("Mcp-Session-Id", "tgs-nope")]);
    assert_eq!((unknown.status, unknown.error_code()), (404, -32007));
    let json_only = get(&[("Accept", "application/json"), ("Mcp-Session-Id", &session.sid)]);
    assert_eq!((json_only.status, json_only.error_code()), (406, -32011), "{json_only:?}");
    assert!(json_only.json()["error"]["data"]["remediation"].as_str().unwrap().contains("text/event-stream"));
    let modern = get(&[sse, ("MCP-Protocol-Version", "2026-07-28")]);
    assert_eq!(modern.status, 405, "2026-07-28 has no GET");
    let garbled = get(&[sse, ("Mcp-Session-Id", &session.sid), ("Last-Event-ID", "yesterday")]);
    assert_eq!((garbled.status, garbled.error_code()), (400, -32600), "{garbled:?}");
}

#[test]
fn get_channels_have_a_cap_of_their_own_and_leave_streamed_calls_their_room() {
    let s = start(&["--max-channels-per-principal", "1", "--max-streams-per-principal", "1"]);
    let (first, second) = (Session::new(&s), Session::new(&s));
    let (_held, head) = first.get(&s, None);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (_, refused) = second.get(&s, None);
    assert!(refused.starts_with("HTTP/1.1 429"), "{refused}");
    assert!(refused.to_ascii_lowercase().contains("\r\nretry-after: 5\r\n"), "{refused}");
    let body = refused.split("\r\n\r\n").nth(1).unwrap_or_default();
    assert!(body.contains("-32012") && body.contains("GET streams"), "{refused}");
    // The channel does not take the principal's room for a streamed call.
    let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "set_plugin_config", "arguments": {"plugin": "sync", "key": "interval", "value": "5"}}});
    let (mut stream, opened) = open_stream(&s, &second.headers(), &call.to_string());
    let seen = read_through(&mut stream, opened, "elicitation/create");
    assert!(seen.starts_with("HTTP/1.1 200") && seen.contains("elicitation/create"), "{seen}");
}

//! `subscriptions/listen` (2026-07-28, issue 47): a stateless client hears an execution's
//! resource change as its agents answer, and an approval ticket's as a person decides it and
//! its recall consumes it, without polling, on one server or across replicas; one that does
//! not exist, or is another principal's, is not followed.

use serde_json::json;

use crate::common;
use common::agents::{FAST, fleet_of_three, wait_finished};
use common::sse::{open_stream, read_until};
use common::{MODERN, Server, modern};

/// A listen with `token` for `uris`, request id `id`: the open stream and the acknowledgement.
fn listen(s: &Server, token: &str, id: i64, uris: &[&str]) -> (std::net::TcpStream, String) {
    let auth = format!("Bearer {token}");
    let headers =
        [("Authorization", auth.as_str()), ("MCP-Protocol-Version", MODERN), ("Mcp-Method", "subscriptions/listen")];
    let asked = json!({"notifications": {"resourceSubscriptions": uris}});
    let (mut stream, first) = open_stream(s, &headers, &modern(id, "subscriptions/listen", asked).to_string());
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    let acknowledged =
        if first.contains("acknowledged") { first } else { read_until(&mut stream, "subscriptions/acknowledged") };
    (stream, acknowledged)
}

#[test]
fn a_listener_hears_an_execution_change_and_only_what_it_may_read() {
    let fleet = fleet_of_three(FAST);
    let (s, ids) = (&fleet.s, &fleet.ids);
    // fleet-b is stopped: its answer comes only once the listener is in place.
    fleet.agents[1].signal("-STOP");
    let arguments = json!({"definition": "os_facts", "agent_ids": [ids["fleet-a"], ids["fleet-b"]]});
    let started = common::call_as(s, &s.token, "execute_instruction", arguments).json();
    let execution = started["result"]["structuredContent"]["execution_id"].as_str().unwrap().to_string();
    let uri = format!("execution://{execution}");
    let other = "execution://exe-00000000deadbeef";

    let (mut stream, acknowledged) = listen(s, &s.token, 41, &[&uri, other]);
    let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {
        "notifications": {"resourceSubscriptions": [uri]}, "_meta": {"io.modelcontextprotocol/subscriptionId": 41}}});
    assert!(acknowledged.contains(&ack.to_string()), "only the readable execution is followed: {acknowledged}");

    fleet.agents[1].signal("-CONT");
    let seen = read_until(&mut stream, "notifications/resources/updated");
    let updated = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                         "params": {"uri": uri, "_meta": {"io.modelcontextprotocol/subscriptionId": 41}}});
    assert!(seen.contains(&updated.to_string()), "{seen}");
    assert_eq!(wait_finished(s, &fleet.schemas, &s.token, &execution)["counts"], json!({"succeeded": 2}));

    // Another principal's listen never follows it: tests/suite/cross_principal.rs.

    // A bad request is refused as such.
    let bad = s.rpc(
        &[("MCP-Protocol-Version", MODERN), ("Mcp-Method", "subscriptions/listen")],
        modern(43, "subscriptions/listen", json!({"notifications": {"resourceSubscriptions": "execution://x"}})),
    );
    assert_eq!(bad.error_code(), -32602, "{bad:?}");
}

/// Replicas on one PostgreSQL database: the agent answers replica B, the listener is on A.
#[test]
fn a_change_stored_by_one_replica_reaches_a_listener_on_the_other() {
    use common::agents::{mint, output_schemas, spawn_agent_to};
    use common::replicas::{fresh_database, replicas};
    let database = fresh_database("listen_across");
    let (a, b) = replicas(&database, &[]);
    let schemas = output_schemas(&a);
    let states = tempfile::tempdir().unwrap();
    let enroll = mint(&b, &["--uses", "1"]);
    let agent = spawn_agent_to(&[&b], Some(&enroll), &states.path().join("on-b"), Some("on-b"), None);
    let agent_id = common::agents::online_by_hostname(&b, &schemas, 1)["on-b"].clone();
    agent.signal("-STOP");
    let arguments = json!({"definition": "os_facts", "agent_ids": [agent_id]});
    let started = common::call_as(&b, &b.token, "execute_instruction", arguments).json();
    let execution = started["result"]["structuredContent"]["execution_id"].as_str().unwrap().to_string();
    let uri = format!("execution://{execution}");

    let (mut stream, acknowledged) = listen(&a, &a.token, 7, &[&uri]);
    assert!(acknowledged.contains(&format!(r#""resourceSubscriptions":["{uri}"]"#)), "{acknowledged}");
    agent.signal("-CONT");
    let seen = read_until(&mut stream, "notifications/resources/updated");
    assert!(seen.contains(&format!(r#""uri":"{uri}""#)), "B stored the answer, A's listener heard it: {seen}");
}

/// An approval ticket's resource: its submitter hears it approved and then consumed by the
/// recall, without polling; another principal's listen never follows it.
#[test]
fn a_listener_hears_its_ticket_approved_and_consumed() {
    use common::agents::approval_id;
    use common::console::{approve, reviewer};
    let s = common::start(&[]);
    let rita = reviewer(&s, "rita");
    let arguments = json!({"agent_id": "agt-00000000000000aa", "key": "env"});
    let id = approval_id(&common::call_as(&s, &s.token, "delete_tag", arguments.clone()));
    let uri = format!("approval://{id}");
    let ticket = |token: &str| common::call_as(&s, token, "get_approval", json!({"approval_id": id})).json();
    assert_eq!(ticket(&s.token)["result"]["structuredContent"]["status"], "pending");

    let unknown = "approval://0123456789abcdef";
    let (mut stream, acknowledged) = listen(&s, &s.token, 51, &[&uri, unknown]);
    assert!(acknowledged.contains(&format!(r#""resourceSubscriptions":["{uri}"]"#)), "{acknowledged}");
    // Another principal, who reads approvals but reviews none, neither reads this ticket nor
    // follows it.
    s.cli(&["principal", "add", "mallory", "--role", "Viewer"]);
    let mallory = s.token("mallory", "supervised", "1h");
    let (_other, theirs) = listen(&s, &mallory, 52, &[&uri, unknown]);
    assert!(theirs.contains(r#""resourceSubscriptions":[]"#), "{theirs}");
    assert_eq!(ticket(&mallory)["result"]["isError"], true, "another's ticket reads as unknown");

    assert_eq!(approve(&s, &rita, &id).status, 200);
    let seen = read_until(&mut stream, "notifications/resources/updated");
    assert!(seen.contains(&uri), "heard approved: {seen}");
    assert_eq!(ticket(&s.token)["result"]["structuredContent"]["status"], "approved");

    let mut recall = arguments;
    recall["approval_id"] = json!(id);
    common::call_as(&s, &s.token, "delete_tag", recall);
    let seen = read_until(&mut stream, "notifications/resources/updated");
    assert!(seen.contains(&uri), "heard consumed: {seen}");
    assert_eq!(ticket(&s.token)["result"]["structuredContent"]["status"], "consumed");
}

/// Replicas on one PostgreSQL database: a person approves on replica B's console, the
/// submitter's listener on A hears it.
#[test]
fn a_ticket_decided_on_one_replica_reaches_a_listener_on_the_other() {
    use common::agents::approval_id;
    use common::console::{approve, reviewer};
    use common::replicas::{fresh_database, replicas};
    let database = fresh_database("listen_approval");
    let (a, b) = replicas(&database, &[]);
    let rita = reviewer(&b, "rita");
    let arguments = json!({"agent_id": "agt-00000000000000aa", "key": "env"});
    let id = approval_id(&common::call_as(&a, &a.token, "delete_tag", arguments));
    let uri = format!("approval://{id}");
    let (mut stream, acknowledged) = listen(&a, &a.token, 9, &[&uri]);
    assert!(acknowledged.contains(&format!(r#""resourceSubscriptions":["{uri}"]"#)), "{acknowledged}");
    assert_eq!(approve(&b, &rita, &id).status, 200);
    let seen = read_until(&mut stream, "notifications/resources/updated");
    assert!(seen.contains(&format!(r#""uri":"{uri}""#)), "B decided, A's listener heard it: {seen}");
}

/// The handshake era's subscription follows a ticket the same way: its GET stream hears the
/// decision.
#[test]
fn a_session_subscribed_to_its_ticket_hears_it_rejected() {
    use common::agents::approval_id;
    use common::console::{decide, reviewer};
    use common::sse::open_get;
    let s = common::start(&[]);
    let rita = reviewer(&s, "rita");
    let id = approval_id(&common::call_as(
        &s,
        &s.token,
        "delete_tag",
        json!({"agent_id": "agt-00000000000000aa", "key": "os"}),
    ));
    let sid = common::initialize(&s, &s.token, json!({}));
    let auth = format!("Bearer {}", s.token);
    let headers =
        [("Authorization", auth.as_str()), ("Mcp-Session-Id", sid.as_str()), ("MCP-Protocol-Version", "2025-11-25")];
    let (mut channel, head) = open_get(&s, &[headers[0], headers[1], ("Accept", "text/event-stream")]);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let uri = format!("approval://{id}");
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "resources/subscribe", "params": {"uri": uri}});
    let subscribed = common::request(s.addr, "POST", &headers, Some(&body.to_string()));
    assert_eq!(subscribed.json()["result"], json!({}), "{subscribed:?}");
    assert_eq!(decide(&s, &rita, &id, "reject", json!({"comment": "not today"})).status, 200);
    let seen = read_until(&mut channel, "notifications/resources/updated");
    assert!(seen.contains(&format!("\"uri\":\"{uri}\"")), "{seen}");
}

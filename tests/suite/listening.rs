//! `subscriptions/listen` (2026-07-28, issue 47): a stateless client hears an execution's
//! resource change as its agents answer, without polling, on one server or across replicas;
//! one that does not exist is not followed.

use serde_json::json;

use crate::common;
use common::agents::{FAST, fleet_of_three, wait_finished};
use common::sse::{open_stream, read_until};
use common::{MODERN, modern};

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

    let auth = format!("Bearer {}", s.token);
    let listen = modern(41, "subscriptions/listen", json!({"notifications": {"resourceSubscriptions": [uri, other]}}));
    let headers =
        [("Authorization", auth.as_str()), ("MCP-Protocol-Version", MODERN), ("Mcp-Method", "subscriptions/listen")];
    let (mut stream, first) = open_stream(s, &headers, &listen.to_string());
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    let acknowledged = if first.contains("subscriptions/acknowledged") {
        first
    } else {
        read_until(&mut stream, "subscriptions/acknowledged")
    };
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

    let auth = format!("Bearer {}", a.token);
    let headers =
        [("Authorization", auth.as_str()), ("MCP-Protocol-Version", MODERN), ("Mcp-Method", "subscriptions/listen")];
    let listen = modern(7, "subscriptions/listen", json!({"notifications": {"resourceSubscriptions": [uri]}}));
    let (mut stream, first) = open_stream(&a, &headers, &listen.to_string());
    let acknowledged =
        if first.contains("acknowledged") { first } else { read_until(&mut stream, "subscriptions/acknowledged") };
    assert!(acknowledged.contains(&format!(r#""resourceSubscriptions":["{uri}"]"#)), "{acknowledged}");
    agent.signal("-CONT");
    let seen = read_until(&mut stream, "notifications/resources/updated");
    assert!(seen.contains(&format!(r#""uri":"{uri}""#)), "B stored the answer, A's listener heard it: {seen}");
}

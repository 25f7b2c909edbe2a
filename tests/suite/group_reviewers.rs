//! Reviewers whose role is on a management group: over MCP, over REST and on the console
//! they see the tickets whose targets lie within their group (and their own), and decide only
//! those; every other ticket reads as unknown. A fleet-wide reviewer sees them all.

use crate::common;

use std::collections::BTreeSet;

use common::agents::*;
use common::console::{decide, get, group_reviewer, reviewer};
use common::teams::two_teams;
use common::{Server, call_as};
use serde_json::{Value, json};

fn ids_of(listing: &Value, key: &str) -> BTreeSet<String> {
    listing[key].as_array().unwrap().iter().map(|a| a["approval_id"].as_str().unwrap().to_string()).collect()
}

fn rest_ids(s: &Server, api: &str) -> BTreeSet<String> {
    let listing = s.http("GET", "/api/v1/approvals?status=pending", Some(api), None).json();
    listing["approvals"].as_array().unwrap().iter().map(|a| a["id"].as_str().unwrap().to_string()).collect()
}

#[test]
fn a_reviewer_on_a_group_sees_and_decides_the_tickets_within_it_only() {
    if !is_root() {
        eprintln!("skipped: the agents need their own hostnames (UTS namespaces), which needs root");
        return;
    }
    let t = two_teams();
    let (s, schemas) = (&t.s, &t.schemas);
    let (a_agent, b_agent) = (t.of('a').pop_first().unwrap(), t.of('b').pop_first().unwrap());
    let held = |token: &str, tool: &str, arguments: Value| approval_id(&call_as(s, token, tool, arguments));

    // Team A's tickets: a tag on its agent, and a scoped run by a submitter confined to A.
    let alice_supervised = s.token("alice", "supervised", "1d");
    structured_as(s, schemas, &t.tokens[&'a'], "set_tag", json!({"agent_id": a_agent, "key": "note", "value": "x"}));
    let a_tag = held(&t.tokens[&'a'], "delete_tag", json!({"agent_id": a_agent, "key": "note"}));
    let a_scoped =
        held(&alice_supervised, "execute_instruction", json!({"definition": "os_facts", "scope": "agent_id exists"}));
    // Not within A: team B's agent, a fleet-wide submitter's scope, a credential (no target),
    // and a ticket of alice's naming team B's agent (the handler would refuse it; its reviewer
    // is a fleet-wide one all the same).
    let b_tag = held(&t.tokens[&'b'], "delete_tag", json!({"agent_id": b_agent, "key": "note"}));
    let admin_supervised = s.token("admin", "supervised", "1d");
    let tomorrow = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 86_400;
    let fleet_scoped =
        held(&admin_supervised, "execute_instruction", json!({"definition": "os_facts", "scope": "agent_id exists"}));
    let credential = held(
        &admin_supervised,
        "create_api_token",
        json!({"name": "ci", "mcp_tier": "readonly", "expires_at": tomorrow}),
    );
    let stray = held(&t.tokens[&'a'], "delete_tag", json!({"agent_id": b_agent, "key": "note"}));

    let rhea = group_reviewer(s, "rhea", &t.groups[&'a']);
    let within: BTreeSet<String> = [a_tag.clone(), a_scoped.clone()].into();

    // Over MCP.
    let rhea_token = s.token("rhea", "readonly", "1d");
    let listed = structured_as(s, schemas, &rhea_token, "list_pending_approvals", json!({}));
    assert_eq!(ids_of(&listed, "approvals"), within, "{listed}");
    let asked = structured_as(s, schemas, &rhea_token, "list_pending_approvals", json!({"submitted_by": "bob"}));
    assert_eq!(asked["count"], 0, "bob's ticket is not within A: {asked}");

    // Over REST: the listing, and one ticket by id (another reads as unknown).
    assert_eq!(rest_ids(s, &rhea.api), within);
    let one = s.http("GET", &format!("/api/v1/approvals/{a_tag}"), Some(&rhea.api), None);
    assert_eq!(one.status, 200, "{}", one.body);
    for outside in [&b_tag, &fleet_scoped, &credential, &stray] {
        let r = s.http("GET", &format!("/api/v1/approvals/{outside}"), Some(&rhea.api), None);
        assert_eq!(r.status, 404, "{outside}: {}", r.body);
    }

    // On the console: the page lists team A's tickets, a scope judged among its submitter's
    // agents (A's three), and no host of team B's.
    let page = get(s, "/console/approvals", &rhea.cookie);
    assert_eq!(page.status, 200, "{}", page.body);
    for id in &within {
        assert!(page.body.contains(&format!("approval-{id}")), "{id}: {}", page.body);
    }
    for id in [&b_tag, &fleet_scoped, &credential, &stray] {
        assert!(!page.body.contains(&format!("approval-{id}")), "{id} is not within A: {}", page.body);
    }
    assert!(page.body.contains("matches now: <strong>3 agents"), "{}", page.body);
    assert!(!page.body.contains("team-b-"), "{}", page.body);
    let fleet_page = get(s, "/console/fleet", &rhea.cookie);
    assert_eq!(fleet_page.status, 403);
    assert!(fleet_page.body.contains("fleet-wide grant"), "{}", fleet_page.body);

    // Deciding: one outside A reads as unknown, one within is decided.
    let refused = decide(s, &rhea, &b_tag, "approve", json!({"comment": "ok"}));
    assert_eq!(refused.status, 404, "{}", refused.body);
    let decided = decide(s, &rhea, &a_tag, "approve", json!({"comment": "ok"}));
    assert_eq!(decided.status, 200, "{}", decided.body);
    let recalled =
        call_as(s, &t.tokens[&'a'], "delete_tag", json!({"agent_id": a_agent, "key": "note", "approval_id": a_tag}))
            .json();
    assert_ne!(recalled["result"]["isError"], true, "alice's approved call runs: {recalled}");

    // The audit log over REST, for a reviewer on A: its own rows and those about A's agents,
    // among them alice's call on A's agent and not bob's on B's.
    let rows = s.http("GET", "/api/v1/audit?limit=1000", Some(&rhea.api), None).json();
    let a_agents = t.of('a');
    let mut actions = BTreeSet::new();
    for e in rows["entries"].as_array().unwrap() {
        let agents: BTreeSet<String> =
            e["agents"].as_array().map_or(vec![], |a| a.clone()).iter().map(|a| a.as_str().unwrap().into()).collect();
        assert!(e["principal"] == "rhea" || (!agents.is_empty() && agents.is_subset(&a_agents)), "{e}");
        actions.insert((
            e["principal"].as_str().unwrap_or_default().to_string(),
            e["action"].as_str().unwrap().to_string(),
        ));
    }
    assert!(actions.contains(&("alice".into(), "mcp.delete_tag".into())), "{actions:?}");
    assert!(!actions.iter().any(|(who, _)| who == "bob"), "{actions:?}");

    // The server's figures are the whole fleet's: a grant on a group does not open them.
    let metrics = s.http("GET", "/metrics", Some(&rhea.api), None);
    assert_eq!(metrics.status, 403);
    assert!(metrics.body.contains("needs a fleet-wide grant"), "{}", metrics.body);

    // A fleet-wide reviewer sees every pending ticket.
    let rita = reviewer(s, "rita");
    let all: BTreeSet<String> = [a_scoped, b_tag, fleet_scoped, credential, stray].into();
    assert_eq!(rest_ids(s, &rita.api), all);
}

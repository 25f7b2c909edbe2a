//! Management groups end to end: six real agents, two teams whose groups choose their agents
//! by a rule on a tag, a principal per team holding Operator on its group only, and a
//! fleet-wide Viewer. Each team sees its three agents in every listing, count, query, scope,
//! resource and completion; the other team's agents read exactly as unknown ones.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::agents::*;
use common::call_as;
use common::teams::{Teams, rpc_as, two_teams};
use serde_json::{Value, json};

fn ids_in(rows: &Value, key: &str) -> BTreeSet<String> {
    rows.as_array().unwrap().iter().map(|r| r[key].as_str().unwrap().to_string()).collect()
}

/// The refusal for an agent id the caller cannot see: the unknown-agent answer, naming none
/// of the other team's agents or hosts.
fn assert_unknown(t: &Teams, team: char, tool: &str, arguments: Value, agent_id: &str) {
    let answer = call_as(&t.s, &t.tokens[&team], tool, arguments).json();
    assert_eq!(answer["result"]["isError"], true, "{tool}: {answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with(&format!("no agent `{agent_id}`: ")) && text.ends_with("; list_agents lists them"),
        "{tool}: {text}"
    );
    let other = if team == 'a' { 'b' } else { 'a' };
    for id in t.of(other).iter().filter(|id| *id != agent_id) {
        assert!(!text.contains(id.as_str()), "{tool} named another team's agent: {text}");
    }
    assert!(!text.contains(&format!("team-{other}-")), "{tool} named another team's host: {text}");
}

#[test]
fn two_teams_each_see_and_act_on_their_own_three_agents_only() {
    if !is_root() {
        eprintln!("skipped: the agents need their own hostnames (UTS namespaces), which needs root");
        return;
    }
    let t = two_teams();
    let (s, schemas) = (&t.s, &t.schemas);
    for team in ['a', 'b'] {
        let (token, mine) = (&t.tokens[&team], t.of(team));
        let listed = structured_as(s, schemas, token, "list_agents", json!({}));
        assert_eq!((listed["total"].clone(), ids_in(&listed["agents"], "agent_id")), (json!(3), mine.clone()));
        let posture = structured_as(s, schemas, token, "get_fleet_posture_fast", json!({}));
        assert_eq!((posture["total"].clone(), posture["online"].clone()), (json!(3), json!(3)), "{posture}");
        let tagged = structured_as(s, schemas, token, "search_agents_by_tag", json!({"key": "team"}));
        assert_eq!(ids_in(&tagged["agents"], "agent_id"), mine);
        let everyone =
            structured_as(s, schemas, token, "preview_scope_targets", json!({"expression": "agent_id exists"}));
        assert_eq!((everyone["count"].clone(), ids_in(&everyone["agents"], "agent_id")), (json!(3), mine.clone()));
        let other_name = if team == 'a' { "Team B" } else { "Team A" };
        let theirs = json!({"expression": format!("group = \"{other_name}\"")});
        assert_eq!(structured_as(s, schemas, token, "preview_scope_targets", theirs)["count"], 0);
        let own = json!({"expression": format!("group = {}", t.groups[&team])});
        assert_eq!(structured_as(s, schemas, token, "preview_scope_targets", own)["count"], 3);
        let bash = json!({"table": "installed_software", "filters": [{"column": "name", "op": "=", "value": "bash"}]});
        let rows = structured_as(s, schemas, token, "query_inventory", bash);
        assert_eq!(ids_in(&rows["rows"], "agent_id"), mine, "{rows}");
        let tables = structured_as(s, schemas, token, "list_inventory_tables", json!({}));
        let software = tables["tables"].as_array().unwrap().iter().find(|t| t["name"] == "installed_software").unwrap();
        assert_eq!(software["agents_reported"], 3, "counts cover the team's agents only");
        // Completions and the agent resources: the team's ids only.
        let completion = rpc_as(
            s,
            token,
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "investigate_agent"}, "argument": {"name": "agent_id", "value": ""}}),
        );
        assert_eq!(completion["result"]["completion"]["values"].as_array().unwrap().len(), 3, "{completion}");
        let offered: BTreeSet<String> = completion["result"]["completion"]["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        assert_eq!(offered, mine);
        let resources = rpc_as(s, token, "resources/list", json!({}));
        let agent_uris = resources["result"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["uri"].as_str().unwrap().starts_with("agent://"))
            .count();
        assert_eq!(agent_uris, 3, "{resources}");
        let health = rpc_as(s, token, "resources/read", json!({"uri": "toolgate://server/health"}));
        let health: Value = serde_json::from_str(health["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(health["agents"], Value::Null, "the server's counts are for fleet-wide readers: {health}");

        // A role on a group grants nothing on what is the whole fleet's (policy.yaml
        // fleet_only); the audit log shows the team's principal its own calls and the rows
        // about its agents (the administrator tagging them), nothing about the other's.
        let config = call_as(s, token, "list_plugin_config", json!({})).json();
        assert_eq!(config["error"]["code"], -32003, "plugin configuration is fleet-wide: {config}");
        let audit = structured_as(s, schemas, token, "query_audit_log", json!({"limit": 1000}));
        let me = if team == 'a' { "alice" } else { "bob" };
        let about = |e: &Value| -> BTreeSet<String> {
            e["agents"].as_array().map_or(vec![], |a| a.clone()).iter().map(|a| a.as_str().unwrap().into()).collect()
        };
        for e in audit["entries"].as_array().unwrap() {
            assert!(e["principal"] == me || (!about(e).is_empty() && about(e).is_subset(&mine)), "{e}");
        }
        let theirs = json!({"principal": "admin", "limit": 1000});
        let theirs = every_page_as(s, schemas, token, "query_audit_log", theirs, "entries");
        let tagged: BTreeSet<String> = theirs.iter().flat_map(about).collect();
        assert_eq!(tagged, mine, "the administrator's rows about the team's agents: {theirs:?}");
        let other_agent = t.of(if team == 'a' { 'b' } else { 'a' }).pop_first().unwrap();
        let none = structured_as(s, schemas, token, "query_audit_log", json!({"agent_id": other_agent}));
        assert_eq!(none["count"], 0, "no row about the other team's agents: {none}");

        // Every way of naming one of the other team's agents reads as an unknown agent.
        let other = if team == 'a' { 'b' } else { 'a' };
        let stranger = t.of(other).into_iter().next().unwrap();
        assert_unknown(&t, team, "get_agent_details", json!({"agent_id": stranger}), &stranger);
        assert_unknown(&t, team, "get_tags", json!({"agent_id": stranger}), &stranger);
        assert_unknown(&t, team, "set_tag", json!({"agent_id": stranger, "key": "note", "value": "x"}), &stranger);
        assert_unknown(
            &t,
            team,
            "get_agent_inventory",
            json!({"agent_id": stranger, "table": "installed_software"}),
            &stranger,
        );
        assert_unknown(
            &t,
            team,
            "execute_instruction",
            json!({"definition": "os_facts", "agent_ids": [stranger]}),
            &stranger,
        );
        let read = rpc_as(s, token, "resources/read", json!({"uri": format!("agent://{stranger}")}));
        assert_eq!(read["error"]["code"], -32602, "{read}");
        assert!(read["error"]["message"].as_str().unwrap().contains(&format!("no agent `{stranger}`")), "{read}");

        // A scope that matches all six runs on the team's three.
        let run = structured_as(
            s,
            schemas,
            token,
            "execute_instruction",
            json!({"definition": "os_facts", "scope": "agent_id exists"}),
        );
        let status = wait_finished(s, schemas, token, run["execution_id"].as_str().unwrap());
        assert_eq!(ids_in(&status["agents"], "agent_id"), mine, "{status}");

        // The tag the groups' rules read is a membership tag: a team cannot retag an agent
        // out of (or into) a group; other tags are its own to set.
        let own_agent = mine.iter().next().unwrap().clone();
        let moved =
            call_as(s, token, "set_tag", json!({"agent_id": own_agent, "key": "team", "value": other.to_string()}))
                .json();
        assert_eq!(moved["error"]["code"], -32003, "refused as a permission: {moved}");
        assert!(moved["error"]["message"].as_str().unwrap().contains("`team` is a membership tag"), "{moved}");
        structured_as(s, schemas, token, "set_tag", json!({"agent_id": own_agent, "key": "note", "value": "ours"}));
    }

    // A fleet-wide Viewer sees all six.
    s.cli(&["principal", "add", "carol", "--role", "Viewer"]);
    let carol = s.token("carol", "readonly", "1d");
    assert_eq!(structured_as(s, schemas, &carol, "list_agents", json!({}))["total"], 6);
    assert_eq!(structured_as(s, schemas, &carol, "get_fleet_posture_fast", json!({}))["total"], 6);

    // A revoked group role takes effect within the authentication cache's lifetime (1 s by
    // default; the bound here is generous).
    s.cli(&["group", "unassign", &t.groups[&'a'], "alice", "Operator"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = call_as(s, &t.tokens[&'a'], "list_agents", json!({})).json();
        if answer["error"]["code"] == -32003 || answer["result"]["isError"] == true {
            break;
        }
        assert!(Instant::now() < deadline, "alice still lists agents after her role was taken away: {answer}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let shown = s.cli(&["group", "show", &t.groups[&'b']]);
    assert!(shown.contains("bob holds Operator") && shown.contains("members (3)"), "{shown}");
}

//! Two teams on one server: six real agents tagged `team=a` or `team=b`, the groups "Team A"
//! and "Team B" choosing them by that tag, alice holding Operator on A and bob on B.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Value, json};

use super::agents::{Agent, FAST, mint, online_by_hostname, output_schemas, spawn_agent, structured};
use super::{Server, request, start};

pub struct Teams {
    pub s: Server,
    pub schemas: HashMap<String, Value>,
    /// Agent ids by hostname (team-a-1 ... team-b-3).
    pub ids: HashMap<String, String>,
    pub groups: HashMap<char, String>,
    pub tokens: HashMap<char, String>,
    _agents: Vec<Agent>,
    _states: tempfile::TempDir,
}

impl Teams {
    pub fn of(&self, team: char) -> BTreeSet<String> {
        self.ids
            .iter()
            .filter(|(host, _)| host.starts_with(&format!("team-{team}-")))
            .map(|(_, id)| id.clone())
            .collect()
    }
}

fn created_group(out: &str) -> String {
    out.split_whitespace().find(|w| w.starts_with("mg-")).unwrap_or_else(|| panic!("no group id in: {out}")).to_string()
}

/// Six agents tagged `team=a` or `team=b` by the fleet's administrator, the groups "Team A"
/// and "Team B" choosing them by that tag, and alice (Operator on A) and bob (Operator on B).
pub fn two_teams() -> Teams {
    let s = start(FAST);
    let schemas = output_schemas(&s);
    let states = tempfile::tempdir().unwrap();
    let token = mint(&s, &["--uses", "6"]);
    let names: Vec<String> = ["a", "b"].iter().flat_map(|t| (1..=3).map(move |n| format!("team-{t}-{n}"))).collect();
    let agents = names.iter().map(|n| spawn_agent(&s, Some(&token), &states.path().join(n), Some(n))).collect();
    let ids = online_by_hostname(&s, &schemas, 6);
    for (host, id) in &ids {
        let team = &host[5..6];
        structured(&s, &schemas, "set_tag", json!({"agent_id": id, "key": "team", "value": team}));
    }
    let mut groups = HashMap::new();
    let mut tokens = HashMap::new();
    for (team, principal) in [('a', "alice"), ('b', "bob")] {
        let rule = format!("tag:team = {team}");
        let out = s.cli(&["group", "create", &format!("Team {}", team.to_ascii_uppercase()), "--rule", &rule]);
        let group = created_group(&out);
        s.cli(&["principal", "add", principal]);
        s.cli(&["group", "assign", &group, principal, "Operator"]);
        tokens.insert(team, s.token(principal, "operator", "1d"));
        groups.insert(team, group);
    }
    Teams { s, schemas, ids, groups, tokens, _agents: agents, _states: states }
}

/// A JSON-RPC request as protocol 2025-11-25 without a session, with `token`.
pub fn rpc_as(s: &Server, token: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": params}).to_string();
    let auth = format!("Bearer {token}");
    request(s.addr, "POST", &[("Authorization", &auth), ("MCP-Protocol-Version", "2025-11-25")], Some(&body)).json()
}

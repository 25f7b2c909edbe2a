//! What a tool call is about, read from its arguments by the catalogue's conventional names:
//! what an approval ticket's reviewer judges and what an audit row is filed under.

use serde_json::Value;

/// What a call would touch, as its arguments name it (the catalogue's conventional
/// argument names): the agents it names (`agent_id`, `agent_ids`), the management groups it
/// names or places something under (`group_id`, `parent_id`), and the scope expression it
/// chooses agents by (`scope`), judged only when the call runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Targets {
    pub agents: Vec<String>,
    pub groups: Vec<String>,
    pub scope: Option<String>,
}

impl Targets {
    pub fn of(arguments: &Value) -> Targets {
        let text = |key: &str| arguments.get(key).and_then(Value::as_str).map(str::to_string);
        let mut agents: Vec<String> = text("agent_id").into_iter().collect();
        if let Some(ids) = arguments.get("agent_ids").and_then(Value::as_array) {
            agents.extend(ids.iter().filter_map(Value::as_str).map(str::to_string));
        }
        let groups = ["group_id", "parent_id"].into_iter().filter_map(text).collect();
        Targets { agents, groups, scope: text("scope") }
    }

    /// A ticket's canonical arguments (JSON text); unreadable text names nothing.
    pub fn of_canonical(canonical: &str) -> Targets {
        serde_json::from_str(canonical).map(|v: Value| Targets::of(&v)).unwrap_or_default()
    }

    /// It names no agent, group or scope: a call about the whole server (a credential, a
    /// fleet-wide role, an account).
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty() && self.groups.is_empty() && self.scope.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::Targets;
    use serde_json::json;

    #[test]
    fn targets_are_read_from_the_conventional_argument_names() {
        let t = Targets::of(&json!({"agent_id": "a", "agent_ids": ["b", "c"], "group_id": "mg-1", "parent_id": "mg-2",
                                    "scope": "tag:x = 1", "key": "k"}));
        assert_eq!(t.agents, ["a", "b", "c"]);
        assert_eq!(t.groups, ["mg-1", "mg-2"]);
        assert_eq!(t.scope.as_deref(), Some("tag:x = 1"));
        assert!(Targets::of(&json!({"name": "ci", "mcp_tier": "readonly"})).is_empty());
        assert!(Targets::of_canonical("not json").is_empty(), "unreadable arguments name nothing");
    }
}

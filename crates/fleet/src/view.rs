//! One agent as filters, scopes and listings see it.

use std::collections::HashMap;
use std::sync::Arc;

use toolgate_domain::fleet::scope::Subject;
use toolgate_domain::fleet::{AgentStatus, AgentSummary, HostFacts};

use crate::hub::Entry;

/// Every agent's tags, read once for a filter or a scope over the whole fleet.
#[derive(Default)]
pub struct TagIndex(HashMap<String, Vec<(String, String)>>);

impl TagIndex {
    pub fn new(rows: Vec<(String, String, String)>) -> Self {
        let mut index: HashMap<String, Vec<(String, String)>> = HashMap::new();
        for (agent, key, value) in rows {
            index.entry(agent).or_default().push((key, value));
        }
        Self(index)
    }

    pub fn of(&self, agent_id: &str) -> &[(String, String)] {
        self.0.get(agent_id).map_or(&[], Vec::as_slice)
    }

    /// Every tag key in use, sorted.
    pub fn keys(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = self.0.values().flatten().map(|(k, _)| k.as_str()).collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }
}

/// Every agent's groups (ancestors included, by id and by name), read once for a scope that
/// names `group`.
#[derive(Default)]
pub struct GroupIndex(HashMap<String, Vec<String>>);

impl GroupIndex {
    pub fn new(labels: HashMap<String, Vec<String>>) -> Self {
        Self(labels)
    }

    pub fn of(&self, agent_id: &str) -> &[String] {
        self.0.get(agent_id).map_or(&[], Vec::as_slice)
    }
}

/// What a filter or scope over the fleet may read beside the agents' facts.
#[derive(Default)]
pub struct Labels {
    pub tags: TagIndex,
    pub groups: GroupIndex,
}

pub struct AgentView<'a> {
    pub agent_id: &'a str,
    pub(crate) entry: &'a Entry,
    pub status: AgentStatus,
    pub(crate) tags: Option<&'a [(String, String)]>,
    pub(crate) groups: Option<&'a [String]>,
}

impl AgentView<'_> {
    pub fn facts(&self) -> Option<&HostFacts> {
        self.entry.facts.as_deref()
    }

    /// The facts, shared rather than copied (a read over the whole fleet keeps them).
    pub fn shared_facts(&self) -> Option<Arc<HostFacts>> {
        self.entry.facts.clone()
    }

    pub fn last_seen_ms(&self) -> Option<i64> {
        self.entry.last_seen_ms
    }

    pub fn facts_at_ms(&self) -> Option<i64> {
        self.entry.facts_at_ms
    }

    /// Whether the server wants the agent quarantined, and what the agent last said it is in.
    pub fn quarantine(&self) -> (bool, Option<bool>) {
        (self.entry.quarantine_wanted, self.entry.quarantine_reported)
    }

    /// How the agent last said it holds a quarantine (None: it never said).
    pub fn quarantine_enforcement(&self) -> Option<&toolgate_domain::fleet::wire::QuarantineEnforcement> {
        self.entry.quarantine_enforcement.as_deref()
    }

    /// Why the server wants it quarantined (while it does).
    pub fn quarantine_reason(&self) -> Option<&str> {
        self.entry.quarantine.as_deref()
    }

    pub fn tags(&self) -> &[(String, String)] {
        self.tags.unwrap_or(&[])
    }

    pub fn summary(&self) -> AgentSummary {
        AgentSummary {
            agent_id: self.agent_id.to_string(),
            status: self.status,
            enrolled_at_ms: self.entry.enrolled_at_ms,
            last_seen_ms: self.entry.last_seen_ms,
            revoked_at_ms: self.entry.revoked_at_ms,
            facts: self.entry.facts.as_deref().cloned(),
            facts_at_ms: self.entry.facts_at_ms,
        }
    }
}

impl Subject for AgentView<'_> {
    fn attribute(&self, name: &str) -> Vec<String> {
        match name {
            "agent_id" => vec![self.agent_id.to_string()],
            "status" => vec![self.status.as_str().to_string()],
            "group" => self.groups.map(<[String]>::to_vec).unwrap_or_default(),
            _ => self.facts().map(|f| f.attribute(name)).unwrap_or_default(),
        }
    }

    fn tag(&self, key: &str) -> Option<&str> {
        self.tags().iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

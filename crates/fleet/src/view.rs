//! One agent as filters, scopes and listings see it.

use std::collections::HashMap;

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

pub struct AgentView<'a> {
    pub agent_id: &'a str,
    pub(crate) entry: &'a Entry,
    pub status: AgentStatus,
    pub(crate) tags: Option<&'a [(String, String)]>,
}

impl AgentView<'_> {
    pub fn facts(&self) -> Option<&HostFacts> {
        self.entry.facts.as_deref()
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
        let one = |v: &str| if v.is_empty() { vec![] } else { vec![v.to_string()] };
        match name {
            "agent_id" => vec![self.agent_id.to_string()],
            "status" => vec![self.status.as_str().to_string()],
            _ => {
                let Some(f) = self.facts() else { return vec![] };
                match name {
                    "hostname" => one(&f.hostname),
                    "os.name" => one(&f.os_name),
                    "os.id" => one(&f.os_id),
                    "os.version" => one(&f.os_version),
                    "kernel" => one(&f.kernel),
                    "arch" => one(&f.arch),
                    "agent.version" => one(&f.agent_version),
                    "cpu.count" => vec![f.cpu_count.to_string()],
                    "memory.total" => vec![f.memory_total_bytes.to_string()],
                    "ip" => f.ip_addresses.clone(),
                    _ => vec![],
                }
            }
        }
    }

    fn tag(&self, key: &str) -> Option<&str> {
        self.tags().iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

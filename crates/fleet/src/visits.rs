//! Reading the registry as a caller may: every visit takes the caller's [`Visible`] set, so no
//! listing, count, scope or lookup can see past it (an agent outside it reads as one that does
//! not exist).

use toolgate_domain::fleet::AgentSummary;
use toolgate_domain::groups::Visible;

use crate::hub::{Entry, Hub};
use crate::view::AgentView;

impl Hub {
    /// Calls `visit` with every agent `visible` holds, in agent id order, under one read of
    /// the registry. Every listing, count and scope a caller asks for goes through here (or
    /// [`Hub::each_labelled`]) with the caller's [`Visible`], so none can see past it.
    pub fn each<T>(&self, visible: &Visible, visit: impl FnMut(&AgentView<'_>) -> Option<T>) -> Vec<T> {
        self.visit_all(visible, None, visit)
    }

    /// Like [`Hub::each`], with each agent's tags and groups (for filters and scopes that name them).
    pub fn each_labelled<T>(
        &self,
        visible: &Visible,
        labels: &crate::Labels,
        visit: impl FnMut(&AgentView<'_>) -> Option<T>,
    ) -> Vec<T> {
        self.visit_all(visible, Some(labels), visit)
    }

    fn visit_all<T>(
        &self,
        visible: &Visible,
        labels: Option<&crate::Labels>,
        mut visit: impl FnMut(&AgentView<'_>) -> Option<T>,
    ) -> Vec<T> {
        let now = self.clock().now_ms();
        let elsewhere = self.elsewhere();
        let agents = self.read();
        let mut view = |id: &String, entry: &Entry| {
            let tags = labels.map(|l| l.tags.of(id));
            let groups = labels.map(|l| l.groups.of(id));
            let status = self.status(entry, elsewhere.get(id).copied(), now);
            visit(&AgentView { agent_id: id, entry, status, tags, groups })
        };
        // The registry is ordered by id: pages come out in id order without a sort. A few
        // visible agents among many are looked up one by one (in id order) instead.
        match visible {
            Visible::Only(ids) if ids.len() * 8 < agents.len() => {
                let mut ids: Vec<&String> = ids.iter().collect();
                ids.sort_unstable();
                ids.into_iter().filter_map(|id| agents.get_key_value(id)).filter_map(|(id, e)| view(id, e)).collect()
            }
            _ => agents.iter().filter(|(id, _)| visible.contains(id)).filter_map(|(id, e)| view(id, e)).collect(),
        }
    }

    /// Calls `look` with one agent, if enrolled and `visible` holds it (an agent outside it
    /// reads exactly as one that does not exist).
    pub fn with_agent<T>(
        &self,
        visible: &Visible,
        agent_id: &str,
        look: impl FnOnce(&AgentView<'_>) -> T,
    ) -> Option<T> {
        if !visible.contains(agent_id) {
            return None;
        }
        let now = self.clock().now_ms();
        let seen_elsewhere = self.elsewhere().get(agent_id).copied();
        let agents = self.read();
        let (agent_id, entry) = agents.get_key_value(agent_id)?;
        let status = self.status(entry, seen_elsewhere, now);
        Some(look(&AgentView { agent_id, entry, status, tags: None, groups: None }))
    }

    /// The host name the agent last reported, if it is enrolled, visible and has reported.
    pub fn hostname(&self, visible: &Visible, agent_id: &str) -> Option<String> {
        self.with_agent(visible, agent_id, |view| view.facts().map(|f| f.hostname.clone())).flatten()
    }

    pub fn summary(&self, visible: &Visible, agent_id: &str) -> Option<AgentSummary> {
        self.with_agent(visible, agent_id, |view| view.summary())
    }

    /// Whether the agent is enrolled (revoked or not) and `visible` holds it.
    pub fn knows(&self, visible: &Visible, agent_id: &str) -> bool {
        visible.contains(agent_id) && self.read().contains_key(agent_id)
    }

    /// The ids of the agents `visible` holds, for "did you mean" answers and completions.
    pub fn agent_ids(&self, visible: &Visible) -> Vec<String> {
        self.each(visible, |view| Some(view.agent_id.to_string()))
    }

    /// How many agents are enrolled (the operator's count, never a caller's).
    pub fn enrolled(&self) -> usize {
        self.read().len()
    }
}

//! Several replicas on one database: each keeps the agents connected to it, announces where
//! they are (the store's `connected_to`), counts those connected elsewhere online while their
//! replica keeps seeing them, and follows what the others change: a new agent, a revocation,
//! an execution whose targets are connected here, a stored result, a quarantine.

use std::collections::HashMap;
use std::sync::Arc;

use toolgate_domain::fleet::wire::ServerMessage;
use toolgate_domain::{CancellationToken, StoreError};
use toolgate_store::{Change, ChangeFeed, MAX_ANNOUNCED_BYTES, ReplicaStore, next_change_until};

use crate::hub::{Connection, Entry, Hub};

impl Hub {
    /// This hub shares its database with other replicas, as `replica`; `announcer` tells
    /// them what it cannot do itself.
    pub fn shared_as(mut self, replica: &str, announcer: Arc<dyn ReplicaStore>) -> Self {
        self.replica = Some(Arc::from(replica));
        self.announcer = Some(announcer);
        self
    }

    /// Of `agent_ids`, those another replica has seen within the offline window.
    pub(crate) fn online_elsewhere(&self, agent_ids: &[&String]) -> Vec<String> {
        let now = self.clock().now_ms();
        let window = self.settings().offline_after_ms();
        let elsewhere = self.elsewhere();
        agent_ids
            .iter()
            .filter(|id| elsewhere.get(id.as_str()).is_some_and(|seen| now - seen <= window))
            .map(|id| id.to_string())
            .collect()
    }

    /// Asks the other replicas to have these agents (connected to them) evaluate now; in
    /// notices small enough for the database to carry.
    pub(crate) fn evaluate_elsewhere(&self, agent_ids: Vec<String>) {
        let Some(announcer) = self.announcer.clone() else { return };
        if agent_ids.is_empty() {
            return;
        }
        tokio::spawn(async move {
            let mut batch = String::new();
            for id in agent_ids {
                if !batch.is_empty() && batch.len() + id.len() + 1 > MAX_ANNOUNCED_BYTES - 100 {
                    announce(&*announcer, Change::Evaluate(std::mem::take(&mut batch))).await;
                }
                if !batch.is_empty() {
                    batch.push(',');
                }
                batch.push_str(&id);
            }
            announce(&*announcer, Change::Evaluate(batch)).await;
        });
    }

    /// Agents connected to other replicas, with when each was last seen there.
    pub(crate) fn elsewhere(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, i64>> {
        self.elsewhere.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Says in the store that the agent is connected here (other replicas count it online).
    pub async fn announce_connected(&self, connection: &Connection) {
        let Some(replica) = &self.replica else { return };
        let now = self.clock().now_ms();
        if let Err(e) = self.store.agent_connected(&connection.agent_id, replica, now).await {
            tracing::warn!(agent_id = %connection.agent_id, "could not record where the agent is connected: {e}");
        }
    }

    /// Reads which agents other replicas have seen within the offline window.
    pub(crate) async fn refresh_elsewhere(&self, now: i64) -> Result<(), StoreError> {
        let Some(replica) = &self.replica else { return Ok(()) };
        let since = now - self.settings().offline_after_ms();
        let found = self.store.connected_elsewhere(replica, since).await?;
        let mut agents = self.write();
        for (agent_id, _, seen) in &found {
            // Enrolled through another replica since this one loaded: known from now on.
            let entry = agents.entry(agent_id.clone()).or_insert_with(|| Entry::enrolled_at(*seen));
            entry.last_seen_ms = entry.last_seen_ms.max(Some(*seen));
        }
        drop(agents);
        *self.elsewhere.write().unwrap_or_else(|e| e.into_inner()) =
            found.into_iter().map(|(agent_id, _, seen)| (agent_id, seen)).collect();
        Ok(())
    }

    /// Follows another replica's change.
    pub async fn apply(&self, change: Change) -> Result<(), StoreError> {
        let now = self.clock().now_ms();
        match change {
            Change::Credentials | Change::ClientAnswer(_) | Change::SessionEnded(_) => {}
            Change::AgentEnrolled(agent_id) => {
                self.write().entry(agent_id).or_insert_with(|| Entry::enrolled_at(now));
            }
            Change::AgentRevoked(agent_id) => self.mark_revoked(&agent_id, now),
            Change::AgentFacts(agent_id) => {
                if let Some(agent) = self.store.agent(&agent_id).await? {
                    self.learn(agent);
                }
            }
            Change::ExecutionCreated(execution_id) => self.deliver_here(&execution_id).await?,
            Change::ExecutionUpdated(execution_id) => drop(self.execution_updates.send(execution_id)),
            Change::Quarantine(agent_id) => self.reload_quarantines(Some(&agent_id)).await?,
            Change::Evaluate(ids) => {
                let rules = self.rules();
                for id in ids.split(',') {
                    self.send(id, ServerMessage::Evaluate { rules: rules.rules.clone() });
                }
            }
            Change::Resync => self.resync().await?,
            Change::KillSwitches => drop(self.kill_switches_changed().await?),
            Change::ApprovalChanged(approval_id) => self.approval_changed(&approval_id),
        }
        Ok(())
    }

    /// Takes in what the store says of an agent: enrolled, revoked, its facts.
    fn learn(&self, agent: toolgate_domain::fleet::AgentSummary) {
        if let Some(at) = agent.revoked_at_ms {
            self.write().entry(agent.agent_id.clone()).or_insert_with(|| Entry::enrolled_at(agent.enrolled_at_ms));
            return self.mark_revoked(&agent.agent_id, at);
        }
        let mut agents = self.write();
        let entry = agents.entry(agent.agent_id).or_insert_with(|| Entry::enrolled_at(agent.enrolled_at_ms));
        if agent.facts_at_ms > entry.facts_at_ms {
            entry.facts = agent.facts.map(Arc::new);
            entry.facts_at_ms = agent.facts_at_ms;
        }
    }

    /// Sends a run created by another replica to its targets connected here.
    pub(crate) async fn deliver_here(&self, execution_id: &str) -> Result<(), StoreError> {
        let Some((order, targets)) = self.work.undelivered(execution_id, self.clock().now_ms()).await? else {
            return Ok(());
        };
        // Only the targets connected here: the others are their own replicas' to send or refuse.
        let here: Vec<String> = targets.into_iter().filter(|agent_id| self.is_live(agent_id)).collect();
        self.dispatch(&order, here).await;
        Ok(())
    }

    /// Reads the quarantine wanted for one agent (or all) again, and tells connected agents
    /// whose wish changed.
    async fn reload_quarantines(&self, only: Option<&str>) -> Result<(), StoreError> {
        for q in self.work.quarantines().await? {
            if only.is_some_and(|id| id != q.agent_id) {
                continue;
            }
            let mut changed = false;
            self.update(&q.agent_id, |e| {
                changed = e.quarantine_wanted != q.wanted || e.quarantine.as_deref() != q.reason.as_deref();
                e.quarantine_wanted = q.wanted;
                e.quarantine = q.reason.as_deref().map(Arc::from);
                // What the agent told another replica of how it holds one.
                if q.enforcement.is_some() {
                    e.quarantine_enforcement = q.enforcement.clone().map(Arc::new);
                }
            });
            if changed || only.is_some() {
                self.send(&q.agent_id, ServerMessage::Quarantine { quarantined: q.wanted, reason: q.reason });
            }
        }
        Ok(())
    }

    /// Notices may have been lost: learn the agents enrolled meanwhile, the quarantines, and
    /// send connected agents every run still due (an agent answers a repeated one from its
    /// journal).
    async fn resync(&self) -> Result<(), StoreError> {
        let now = self.clock().now_ms();
        for agent in self.store.agents().await? {
            self.learn(agent);
        }
        self.reload_quarantines(None).await?;
        self.kill_switches_changed().await?;
        for agent_id in self.live_agent_ids() {
            for order in self.work.due_for(&agent_id, now).await? {
                self.dispatch(&order, vec![agent_id.clone()]).await;
            }
        }
        Ok(())
    }

    /// Applies every change the feed brings until `stop`.
    pub async fn follow(self: Arc<Self>, feed: Arc<ChangeFeed>, stop: CancellationToken) {
        let mut changes = feed.subscribe();
        while let Some(change) = next_change_until(&mut changes, &stop).await {
            if let Err(e) = self.apply(change.clone()).await {
                tracing::warn!("could not follow another replica's change {change:?}: {e}");
            }
        }
    }
}

async fn announce(announcer: &dyn ReplicaStore, change: Change) {
    if let Err(e) = announcer.announce(change).await {
        tracing::warn!("could not ask the other replicas' agents to evaluate: {e}");
    }
}

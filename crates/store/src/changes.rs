//! What other replicas changed, as it happens: a shared database tells every replica (on
//! PostgreSQL, `NOTIFY` in the writing transaction, heard through `LISTEN` on a connection of
//! its own) so that what each keeps in memory follows: the authentication cache, the agents
//! it knows, the runs its connected agents are due.
//!
//! The embedded SQLite store has no feed: it serves one server process, and what the console
//! commands change there is picked up by the cache's time to live and the fleet's sweep.

use tokio::sync::broadcast;

/// One change made by another replica (or [`Change::Resync`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A principal or a token changed (revoked, rotated, removed, new roles).
    Credentials,
    AgentEnrolled(String),
    AgentRevoked(String),
    /// An agent reported its host's facts (hostname, OS, ...).
    AgentFacts(String),
    /// A new execution: its targets connected here are to be sent the run.
    ExecutionCreated(String),
    /// An agent's result for this execution was stored.
    ExecutionUpdated(String),
    /// The quarantine wanted for this agent changed.
    Quarantine(String),
    /// A client's answer (JSON: session, id, outcome) to a question a call on another replica
    /// asked: the replica holding the call takes it.
    ClientAnswer(String),
    /// These agents (ids, comma-separated) are to evaluate their compliance rules now: asked
    /// through another replica, connected here.
    Evaluate(String),
    /// A handshake-era MCP session was ended (DELETE, or a failed resume) on another replica.
    SessionEnded(String),
    /// A plugin kill switch was set: every replica reads the engaged ones again.
    KillSwitches,
    /// An approval ticket was decided or consumed: whoever follows it hears so.
    ApprovalChanged(String),
    /// Changes may have been missed (the feed's connection was lost and is back): whoever
    /// keeps something in memory reads it again.
    Resync,
}

impl Change {
    /// The text a notification carries: `kind` and, for the kinds about one thing, its id.
    pub fn encode(&self) -> String {
        match self {
            Change::Credentials => "credentials".into(),
            Change::AgentEnrolled(id) => format!("enrolled {id}"),
            Change::AgentRevoked(id) => format!("revoked {id}"),
            Change::AgentFacts(id) => format!("facts {id}"),
            Change::ExecutionCreated(id) => format!("execution {id}"),
            Change::ExecutionUpdated(id) => format!("result {id}"),
            Change::Quarantine(id) => format!("quarantine {id}"),
            Change::ClientAnswer(json) => format!("answer {json}"),
            Change::SessionEnded(id) => format!("session-ended {id}"),
            Change::Evaluate(ids) => format!("evaluate {ids}"),
            Change::Resync => "resync".into(),
            Change::KillSwitches => "kill-switches".into(),
            Change::ApprovalChanged(id) => format!("approval {id}"),
        }
    }

    pub(crate) fn decode(text: &str) -> Option<Self> {
        let (kind, id) = text.split_once(' ').unwrap_or((text, ""));
        let id = id.to_string();
        Some(match (kind, id.is_empty()) {
            ("credentials", true) => Change::Credentials,
            ("resync", true) => Change::Resync,
            ("kill-switches", true) => Change::KillSwitches,
            ("enrolled", false) => Change::AgentEnrolled(id),
            ("revoked", false) => Change::AgentRevoked(id),
            ("facts", false) => Change::AgentFacts(id),
            ("execution", false) => Change::ExecutionCreated(id),
            ("result", false) => Change::ExecutionUpdated(id),
            ("quarantine", false) => Change::Quarantine(id),
            ("answer", false) => Change::ClientAnswer(id),
            ("session-ended", false) => Change::SessionEnded(id),
            ("evaluate", false) => Change::Evaluate(id),
            ("approval", false) => Change::ApprovalChanged(id),
            _ => return None,
        })
    }
}

/// Changes kept for a slow listener before it is told it lagged (then it resyncs).
const BUFFER: usize = 4096;

/// Where a replica hears of other replicas' changes.
#[derive(Debug)]
pub struct ChangeFeed {
    sender: broadcast::Sender<Change>,
}

impl Default for ChangeFeed {
    fn default() -> Self {
        Self { sender: broadcast::channel(BUFFER).0 }
    }
}

impl ChangeFeed {
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.sender.subscribe()
    }

    pub(crate) fn publish(&self, change: Change) {
        // Nobody listening is fine.
        let _ = self.sender.send(change);
    }
}

/// The next change for a listener; a listener that fell behind gets [`Change::Resync`].
/// None when the feed is gone.
pub async fn next_change(receiver: &mut broadcast::Receiver<Change>) -> Option<Change> {
    match receiver.recv().await {
        Ok(change) => Some(change),
        Err(broadcast::error::RecvError::Lagged(_)) => Some(Change::Resync),
        Err(broadcast::error::RecvError::Closed) => None,
    }
}

/// [`next_change`], or None once `stop` is cancelled.
pub async fn next_change_until(
    receiver: &mut broadcast::Receiver<Change>,
    stop: &toolgate_domain::CancellationToken,
) -> Option<Change> {
    tokio::select! {
        _ = stop.cancelled() => None,
        change = next_change(receiver) => change,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_change_reads_back_as_written() {
        let all = [
            Change::Credentials,
            Change::AgentEnrolled("agt-1".into()),
            Change::AgentRevoked("agt-1".into()),
            Change::AgentFacts("agt-1".into()),
            Change::ExecutionCreated("exe-1".into()),
            Change::ExecutionUpdated("exe-1".into()),
            Change::Quarantine("agt-1".into()),
            Change::ClientAnswer(r#"{"session":"s 1","id":3}"#.into()),
            Change::SessionEnded("tgs-1".into()),
            Change::Evaluate("agt-1,agt-2".into()),
            Change::Resync,
        ];
        for change in all {
            assert_eq!(Change::decode(&change.encode()), Some(change));
        }
        assert_eq!(Change::decode("enrolled"), None);
        assert_eq!(Change::decode("nonsense x"), None);
    }
}

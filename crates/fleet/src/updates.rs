//! What changes while the server runs, told to whoever follows it (MCP subscriptions and
//! listens): executions as their agents' responses are stored, approval tickets as they are
//! decided or consumed, here or on another replica.

use tokio::sync::broadcast::Receiver;

use crate::hub::Hub;

impl Hub {
    /// Hears the id of each execution as its agents' responses are stored.
    pub fn execution_updates(&self) -> Receiver<String> {
        self.execution_updates.subscribe()
    }

    /// Hears the id of each approval ticket as it is decided or consumed.
    pub fn approval_updates(&self) -> Receiver<String> {
        self.approval_updates.subscribe()
    }

    /// A ticket was decided or consumed: its followers are told (nobody following is fine).
    pub fn approval_changed(&self, approval_id: &str) {
        drop(self.approval_updates.send(approval_id.to_string()));
    }
}

//! A live agent's connection through the hub: registered (replacing an older one), kept
//! alive by what it sends, closed when it ends or the server stops.

use std::sync::atomic::Ordering;

use tokio::sync::{mpsc, oneshot};

use crate::hub::{Connection, Entry, Hub, Kick, Link, Live};

impl Hub {
    /// Live connections now (kept as a count: every new connection asks).
    pub fn connected(&self) -> usize {
        self.live_connections.load(Ordering::Relaxed) as usize
    }

    /// Registers a live connection of an authenticated agent over `link`; a previous one is
    /// closed.
    pub fn connect(&self, agent_id: &str, link: Link) -> Connection {
        let id = self.next_connection.fetch_add(1, Ordering::Relaxed);
        let (kick, kicked) = oneshot::channel();
        let (outbox, outbox_rx) = mpsc::unbounded_channel();
        let now = self.clock().now_ms();
        let mut agents = self.write();
        // Absent: enrolled by another process after this hub loaded (the store said it is valid).
        let entry = agents.entry(agent_id.to_string()).or_insert_with(|| Entry::enrolled_at(now));
        match entry.live.replace(Live { id, kick, outbox, link }) {
            Some(previous) => {
                let _ = previous.kick.send(Kick::Replaced);
            }
            None => {
                self.live_connections.fetch_add(1, Ordering::Relaxed);
            }
        }
        entry.last_seen_ms = Some(now);
        Connection { agent_id: agent_id.to_string(), id, kicked, outbox: outbox_rx }
    }

    /// The server is stopping: every session is closed, so that nothing it holds (this hub,
    /// and through it the audit writer) outlives the server; agents reconnect by themselves.
    pub fn close_all(&self) {
        let mut agents = self.write();
        for entry in agents.values_mut() {
            if let Some(live) = entry.live.take() {
                self.live_connections.fetch_sub(1, Ordering::Relaxed);
                let _ = live.kick.send(Kick::Stopping);
            }
        }
    }

    /// Any message from the agent: it is alive.
    pub fn seen(&self, connection: &Connection) {
        let now = self.clock().now_ms();
        if let Some(entry) = self.write().get_mut(&connection.agent_id)
            && entry.live.as_ref().is_some_and(|l| l.id == connection.id)
        {
            entry.last_seen_ms = Some(now);
        }
    }

    /// The connection ended; the agent is offline unless a newer connection replaced it.
    pub async fn disconnect(&self, connection: &Connection) {
        let seen = {
            let mut agents = self.write();
            let Some(entry) = agents.get_mut(&connection.agent_id) else { return };
            if entry.live.as_ref().is_some_and(|l| l.id == connection.id) {
                entry.live = None;
                self.live_connections.fetch_sub(1, Ordering::Relaxed);
            }
            entry.last_seen_ms
        };
        let Some(at) = seen else { return };
        let saved = match &self.replica {
            Some(replica) => self.store.agent_disconnected(&connection.agent_id, replica, at).await,
            None => self.store.save_last_seen(&[(connection.agent_id.clone(), at)]).await,
        };
        if let Err(e) = saved {
            tracing::warn!(agent_id = %connection.agent_id, "could not save when the agent was last seen: {e}");
        }
    }
}

//! Revocation and the sweep: connections closed when their agent is revoked (here or on the
//! console), its certificate revoked or expired ([`crate::certs`]), or it falls silent, last-seen times saved, overdue executions finished.

use std::sync::atomic::Ordering;

use toolgate_domain::StoreError;

use crate::hub::{Hub, Kick};

/// The longest pause between sweeps, in ms (revocations from the console apply within it).
const SWEEP_AT_LEAST_EVERY_MS: u64 = 1_000;

impl Hub {
    /// Revokes an agent and closes its connection; false when it was unknown or already revoked.
    pub async fn revoke(&self, agent_id: &str) -> Result<bool, StoreError> {
        let now = self.clock().now_ms();
        let revoked = self.store.revoke_agent(agent_id, now).await?;
        if revoked {
            self.mark_revoked(agent_id, now);
        }
        Ok(revoked)
    }

    /// Closes the agent's session and, through [`crate::ReportPlace::revoked`], its report
    /// connections.
    pub(crate) fn mark_revoked(&self, agent_id: &str, at_ms: i64) {
        if let Some(entry) = self.write().get_mut(agent_id) {
            entry.revoked_at_ms.get_or_insert(at_ms);
            if let Some(live) = entry.live.take() {
                self.live_connections.fetch_sub(1, Ordering::Relaxed);
                let _ = live.kick.send(Kick::Revoked);
            }
        }
        self.revocations.send_modify(|generation| *generation += 1);
    }

    /// How often [`Hub::sweep`] should run: often enough that a revocation made on the
    /// console disconnects its agent within a second, whatever the heartbeat interval.
    pub fn sweep_interval(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.settings().heartbeat_ms.clamp(10, SWEEP_AT_LEAST_EVERY_MS))
    }

    /// Closes silent connections and those of agents revoked elsewhere (the console). With
    /// `save_last_seen`, also writes when each connected agent was last seen (the caller does
    /// that about once a heartbeat interval, not every sweep).
    pub async fn sweep(&self, save_last_seen: bool) -> Result<(), StoreError> {
        let now = self.clock().now_ms();
        let window = self.settings().offline_after_ms();
        let mut seen = Vec::new();
        {
            let mut agents = self.write();
            for (agent_id, entry) in agents.iter_mut() {
                if entry.live.is_none() {
                    continue;
                }
                let last = entry.last_seen_ms.unwrap_or(0);
                if now - last > window
                    && let Some(live) = entry.live.take()
                {
                    tracing::info!(%agent_id, "no heartbeat for {} ms: offline", now - last);
                    self.live_connections.fetch_sub(1, Ordering::Relaxed);
                    let _ = live.kick.send(Kick::Silent);
                }
                if save_last_seen {
                    seen.push((agent_id.clone(), last));
                }
            }
        }
        // Revocations made by another process: look back a little past the last check, so a
        // revocation committed while the last check ran is not missed.
        let since = self.revocations_checked_ms.swap(now, Ordering::Relaxed) - 5_000;
        for agent_id in self.store.revoked_since(since).await? {
            let live = self.read().get(&agent_id).is_some_and(|e| e.live.is_some() || e.revoked_at_ms.is_none());
            if live {
                tracing::info!(%agent_id, "revoked: disconnected");
                self.mark_revoked(&agent_id, now);
            }
        }
        self.check_certificates(false).await?;
        if !seen.is_empty() {
            self.store.save_last_seen(&seen).await?;
        }
        self.refresh_elsewhere(now).await?;
        self.expire_overdue().await
    }
}

//! Report connections: where an agent uploads facts, inventory and large results. Each takes
//! a place of its agent's (at most [`MAX_REPORTS_PER_AGENT`], so one agent cannot hold every
//! slot) and one of the server's slots, and closes as soon as its agent is revoked.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::OwnedSemaphorePermit;

use crate::hub::{Entry, Hub};

/// Report connections one agent may hold open at once: its scheduled report and a result
/// upload may overlap; nothing the agent does needs more.
pub const MAX_REPORTS_PER_AGENT: u8 = 2;
/// Report connections that may wait for a slot at once.
pub const MAX_WAITING_REPORTS: u64 = 1024;
/// How long a report connection waits for a slot before it is told the server is busy.
pub const REPORT_QUEUE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Why a report connection got no place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReportRefusal {
    #[error("this agent already has {MAX_REPORTS_PER_AGENT} report connections open; retrying later")]
    TooManyForAgent,
    #[error("the server is taking as many reports as it may at once; retrying later")]
    Busy,
}

/// A report connection's place; given back when dropped.
pub struct ReportPlace<'a> {
    hub: &'a Hub,
    agent_id: String,
    revocations: tokio::sync::watch::Receiver<u64>,
    _slot: Option<OwnedSemaphorePermit>,
}

impl Hub {
    /// A place for one report connection of `agent_id`: refused at once past the agent's own
    /// limit; otherwise it waits for a server slot in a queue of at most
    /// [`MAX_WAITING_REPORTS`], for at most [`REPORT_QUEUE_WAIT`]. Queueing rather than
    /// refusing at once keeps the store busy while a whole fleet reports after a restart; the
    /// bound keeps waiting connections (each a descriptor) well below the process's file limit.
    pub async fn report_place(&self, agent_id: &str) -> Result<ReportPlace<'_>, ReportRefusal> {
        {
            let now = self.clock().now_ms();
            let mut agents = self.write();
            // Absent: enrolled by another process after this hub loaded (the store said it is valid).
            let entry = agents.entry(agent_id.to_string()).or_insert_with(|| Entry::enrolled_at(now));
            if entry.reports_open >= MAX_REPORTS_PER_AGENT {
                return Err(ReportRefusal::TooManyForAgent);
            }
            entry.reports_open += 1;
        }
        let mut place = ReportPlace {
            hub: self,
            agent_id: agent_id.to_string(),
            revocations: self.revocations.subscribe(),
            _slot: None,
        };
        place._slot = Some(self.report_slot().await.ok_or(ReportRefusal::Busy)?);
        Ok(place)
    }

    async fn report_slot(&self) -> Option<OwnedSemaphorePermit> {
        struct Waiting<'a>(&'a AtomicU64);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        let waiting = Waiting(&self.reports_waiting);
        if waiting.0.fetch_add(1, Ordering::Relaxed) >= MAX_WAITING_REPORTS {
            return None;
        }
        let acquired = tokio::time::timeout(REPORT_QUEUE_WAIT, self.reports.clone().acquire_owned()).await;
        acquired.ok()?.ok()
    }
}

impl ReportPlace<'_> {
    /// Resolves once the agent is revoked (at once if it is already).
    pub async fn revoked(&mut self) {
        loop {
            if self.hub.is_revoked(&self.agent_id) {
                return;
            }
            if self.revocations.changed().await.is_err() {
                // The hub is gone: nothing will ever revoke.
                return std::future::pending().await;
            }
        }
    }
}

impl Drop for ReportPlace<'_> {
    fn drop(&mut self) {
        if let Some(entry) = self.hub.write().get_mut(&self.agent_id) {
            entry.reports_open = entry.reports_open.saturating_sub(1);
        }
    }
}

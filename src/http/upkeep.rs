//! The server's periodic work: summaries of aggregated authentication failures as their
//! windows close, and the audit log's retention. It holds only what it needs (not the whole
//! state), so the audit writer can drain at shutdown; it flushes every open window first.

use std::sync::Arc;
use std::time::Duration;

use toolgate_domain::audit::{AuditEvent, AuditOutcome, AuditSink, TargetType};
use toolgate_domain::{CancellationToken, Clock};
use toolgate_store::{AuditStore, AuditWriter};

use super::auth_failures::AuthFailures;

/// How often retention runs (and once at start).
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

pub struct Upkeep {
    pub failures: Arc<AuthFailures>,
    pub audit: AuditWriter,
    pub audit_log: Arc<dyn AuditStore>,
    pub clock: Clock,
    /// Audit rows older than this are deleted.
    pub retention_ms: i64,
}

impl Upkeep {
    pub async fn run(self, stop: CancellationToken) {
        let tick = Duration::from_millis((self.failures.window_ms() / 4).clamp(100, 5_000) as u64);
        let mut pruned_at = None;
        loop {
            if pruned_at.is_none_or(|at: std::time::Instant| at.elapsed() >= PRUNE_EVERY) {
                self.prune().await;
                pruned_at = Some(std::time::Instant::now());
            }
            let stopping = tokio::select! {
                _ = stop.cancelled() => true,
                _ = tokio::time::sleep(tick) => false,
            };
            self.summarize(stopping);
            if stopping {
                return;
            }
        }
    }

    fn summarize(&self, everything: bool) {
        let now = self.clock.now_ms();
        for summary in self.failures.collect(now, everything) {
            let mut event = AuditEvent::new(now, "auth.failure", AuditOutcome::Denied).detail(summary.detail());
            if let Some(source) = summary.source {
                event = event.target(TargetType::ClientAddress, source.to_string());
            }
            self.audit.record(event);
        }
    }

    async fn prune(&self) {
        let before = self.clock.now_ms() - self.retention_ms;
        match self.audit_log.prune(before).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(rows = n, "audit rows older than the retention deleted"),
            Err(e) => tracing::warn!("audit retention could not run: {e}"),
        }
    }
}

//! The server's periodic work: summaries of aggregated authentication failures as their
//! windows close, credential rotations whose overlap ended (resolved by themselves, audited
//! once whichever replica sees them first), the audit log's retention, and uploads' retention
//! (content whose every grant's retention class ended, and chunks of uploads never finished),
//! and the experience history's (docs/experience.md). It holds only what it needs (not the whole
//! state), so the audit writer can drain at shutdown; it flushes every open window first. Beside
//! it run the agent sweep and the hourly making of the devices' recent experience views.

use std::sync::Arc;
use std::time::Duration;

use toolgate_domain::audit::{AuditEvent, AuditOutcome, AuditSink, TargetType};
use toolgate_domain::engines::ENGINE_PREFIX;
use toolgate_domain::{CancellationToken, Clock};
use toolgate_fleet::Hub;
use toolgate_store::{AuditStore, AuditWriter, CredentialStore, ExperienceStore, Retention, UploadStore};

use super::auth_failures::AuthFailures;

/// How often retention runs (and once at start).
const PRUNE_EVERY: Duration = Duration::from_secs(3600);
/// How often uploads and experience past their retention are deleted (and once at start).
const UPLOAD_SWEEP_EVERY: Duration = Duration::from_secs(60);

pub struct Upkeep {
    pub failures: Arc<AuthFailures>,
    pub audit: AuditWriter,
    pub audit_log: Arc<dyn AuditStore>,
    pub credentials: Arc<dyn CredentialStore>,
    pub uploads: Arc<dyn UploadStore>,
    pub experience: Arc<dyn ExperienceStore>,
    pub experience_retention: Retention,
    pub clock: Clock,
    /// Audit rows older than this are deleted.
    pub retention_ms: i64,
}

impl Upkeep {
    pub async fn run(self, stop: CancellationToken) {
        let tick = Duration::from_millis((self.failures.window_ms() / 4).clamp(100, 5_000) as u64);
        let (mut pruned_at, mut swept_at) = (None, None);
        loop {
            if pruned_at.is_none_or(|at: std::time::Instant| at.elapsed() >= PRUNE_EVERY) {
                self.prune().await;
                pruned_at = Some(std::time::Instant::now());
            }
            if swept_at.is_none_or(|at: std::time::Instant| at.elapsed() >= UPLOAD_SWEEP_EVERY) {
                self.sweep_uploads().await;
                self.sweep_experience().await;
                swept_at = Some(std::time::Instant::now());
            }
            let stopping = tokio::select! {
                _ = stop.cancelled() => true,
                _ = tokio::time::sleep(tick) => false,
            };
            self.summarize(stopping);
            self.resolve_lapsed_rotations().await;
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

    /// A rotation never confirmed resolves when its overlap ends: the predecessor expired by
    /// itself. The store resolves each once (under concurrent replicas too); each gets a row.
    async fn resolve_lapsed_rotations(&self) {
        let now = self.clock.now_ms();
        let lapsed = match self.credentials.resolve_lapsed_rotations(now / 1000).await {
            Ok(lapsed) => lapsed,
            Err(e) => return tracing::warn!("lapsed credential rotations could not be resolved: {e}"),
        };
        for rotation in lapsed {
            let action = match rotation.principal.starts_with(ENGINE_PREFIX) {
                true => "engine.rotation_expired",
                false => "token.rotation_expired",
            };
            let detail = format!(
                "rotation to {} resolved by itself: the overlap ended at {} and {} expired unconfirmed",
                rotation.successor_id, rotation.overlap_ends_at, rotation.predecessor_id
            );
            let event = AuditEvent::new(now, action, AuditOutcome::Success)
                .by_principal(&rotation.principal)
                .target(TargetType::Principal, rotation.principal.clone())
                .detail(detail);
            self.audit.record(event);
        }
    }

    /// Deletes uploaded content whose retention ended (one audit row each) and the chunks of
    /// uploads that never finished. Every replica may run it: each row goes once.
    async fn sweep_uploads(&self) {
        let now = self.clock.now_ms();
        let swept = match self.uploads.sweep_uploads(now).await {
            Ok(swept) => swept,
            Err(e) => return tracing::warn!("upload retention could not run: {e}"),
        };
        for (sha256, size) in swept.deleted {
            let detail = format!("uploaded content sha256 {sha256} ({size} bytes) deleted: its retention ended");
            self.audit.record(AuditEvent::new(now, "upload.deleted", AuditOutcome::Success).detail(detail));
        }
        if swept.orphan_chunks > 0 {
            tracing::info!(chunks = swept.orphan_chunks, "chunks of unfinished uploads deleted");
        }
    }

    /// Raw samples, hourly and daily rollups past their retention. Every replica may run it.
    async fn sweep_experience(&self) {
        match self.experience.sweep_experience(self.clock.now_ms(), self.experience_retention).await {
            Ok(swept) if swept == Default::default() => {}
            Ok(swept) => tracing::debug!(
                raw = swept.raw,
                hourly = swept.hourly,
                daily = swept.daily,
                "experience past its retention deleted"
            ),
            Err(e) => tracing::warn!("experience retention could not run: {e}"),
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

/// At least every second: close silent agent connections and those revoked elsewhere; about
/// once a heartbeat interval, also save when each agent was last seen.
pub async fn sweep_agents(hub: Arc<Hub>, stop: CancellationToken) {
    let every = hub.sweep_interval();
    let save_every = std::time::Duration::from_millis(hub.settings().heartbeat_ms);
    let mut saved_at = std::time::Instant::now();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let save = saved_at.elapsed() >= save_every;
        if save {
            saved_at = std::time::Instant::now();
        }
        if let Err(e) = hub.sweep(save).await {
            tracing::warn!("the agent sweep failed: {e}");
        }
    }
}

/// As each hour begins (and once at start), makes every device's recent experience view again
/// (docs/experience.md, "At scale"): the day window moved, and reads should not make them.
pub async fn refresh_experience_views(hub: Arc<Hub>, stop: CancellationToken) {
    loop {
        let started = std::time::Instant::now();
        // Stopping does not wait for it: the views are only this process's memory.
        let made = tokio::select! {
            _ = stop.cancelled() => return,
            made = hub.refresh_experience_views() => made,
        };
        match made {
            Ok(made) => {
                tracing::debug!(made, elapsed_ms = started.elapsed().as_millis() as u64, "experience views made")
            }
            Err(e) => tracing::warn!("the experience views could not be made: {e}"),
        }
        let now = hub.clock().now_ms();
        // A second past the next hour, so that the hour has begun on every clock reading.
        let wait = toolgate_store::HOUR_MS - now.rem_euclid(toolgate_store::HOUR_MS) + 1_000;
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(wait as u64)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use toolgate_domain::audit::AuditFilter;
    use toolgate_domain::tokens::NewToken;
    use toolgate_store::SqliteStore;

    use super::*;

    /// A rotation nobody confirmed resolves once its overlap has ended, with one audit row
    /// naming the successor; the next pass finds nothing more (an injected clock, no waiting).
    #[tokio::test]
    async fn a_lapsed_rotation_is_resolved_and_audited_once() {
        let store = SqliteStore::open_in_memory().unwrap().repositories();
        let clock = Clock::stopped_at(1_800_000_000_000);
        let now = clock.now_secs();
        store.credentials.put_principal("alice", &[], now).await.unwrap();
        let new = NewToken {
            principal: "alice",
            tier: Some("readonly"),
            name: "t",
            now,
            expires_at: now + 86_400,
            toolsets: None,
        };
        let (token, _) = store.credentials.create_token(new).await.unwrap();
        let (successor, _) = store.credentials.rotate_token(&token, 60, token.expires_at, now).await.unwrap();
        let (audit, writer) = AuditWriter::start(store.audit.clone());
        let upkeep = Upkeep {
            failures: Arc::new(AuthFailures::new(1000)),
            audit,
            audit_log: store.audit.clone(),
            credentials: store.credentials.clone(),
            uploads: store.uploads.clone(),
            experience: store.experience.clone(),
            experience_retention: toolgate_store::Retention::default(),
            clock: clock.clone(),
            retention_ms: i64::MAX,
        };
        upkeep.resolve_lapsed_rotations().await;
        clock.advance_ms(60_000);
        upkeep.resolve_lapsed_rotations().await;
        upkeep.resolve_lapsed_rotations().await;
        drop(upkeep);
        writer.await.unwrap();
        let filter =
            AuditFilter { action_prefix: Some("token.rotation_expired".into()), limit: 10, ..Default::default() };
        let rows = store.audit.query(&filter).await.unwrap();
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert!(rows[0].detail.as_deref().unwrap().contains(&successor.id), "{rows:?}");
    }
}

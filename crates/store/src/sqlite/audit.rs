//! The audit log in SQLite: rows appended in batches (an fsync only when a caller waits on
//! one), read back newest first, pruned by age.

use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::params;
use toolgate_domain::StoreError;
use toolgate_domain::audit::{AuditEvent, AuditFilter};

use super::{SqliteStore, without_fsync};
use crate::AuditStore;

type Result<T> = std::result::Result<T, StoreError>;

fn append_rows(c: &mut rusqlite::Connection, events: &[AuditEvent]) -> rusqlite::Result<()> {
    let tx = c.transaction()?;
    {
        let mut stmt = tx.prepare_cached(
            "INSERT INTO audit (at_ms, principal, token_id, action, target, result, detail, correlation_id, target_type) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?;
        for e in events {
            stmt.execute(params![
                e.at_ms,
                e.principal,
                e.token_id,
                e.action,
                e.target,
                e.result,
                e.detail,
                e.correlation_id,
                e.target_type
            ])?;
        }
    }
    tx.commit()
}

#[async_trait]
impl AuditStore for SqliteStore {
    async fn append(&self, events: Arc<[AuditEvent]>, durable: bool) -> Result<()> {
        // A batch nobody waits on skips the fsync; a state-changing call's row does not.
        self.run(move |c| if durable { append_rows(c, &events) } else { without_fsync(c, |c| append_rows(c, &events)) })
            .await
    }

    async fn query(&self, f: &AuditFilter) -> Result<Vec<AuditEvent>> {
        let f = f.clone();
        self.run(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT at_ms, principal, token_id, action, target, result, detail, correlation_id, target_type FROM audit
                 WHERE (?1 IS NULL OR at_ms >= ?1) AND (?2 IS NULL OR at_ms <= ?2) AND (?3 IS NULL OR principal = ?3)
                   AND (?4 IS NULL OR substr(action, 1, length(?4)) = ?4) AND (?5 IS NULL OR result = ?5)
                   AND (?6 IS NULL OR correlation_id = ?6) AND (?8 IS NULL OR target_type = ?8)
                 ORDER BY id DESC LIMIT ?7",
            )?;
            let rows = stmt.query_map(
                params![f.since_ms, f.until_ms, f.principal, f.action_prefix, f.result, f.correlation_id, f.limit, f.target_type],
                |r| {
                    Ok(AuditEvent {
                        at_ms: r.get(0)?,
                        principal: r.get(1)?,
                        token_id: r.get(2)?,
                        action: r.get(3)?,
                        target: r.get(4)?,
                        target_type: r.get(8)?,
                        result: r.get(5)?,
                        detail: r.get(6)?,
                        correlation_id: r.get(7)?,
                        replica: None,
                    })
                },
            )?;
            rows.collect()
        })
        .await
    }

    async fn prune(&self, before_ms: i64) -> Result<u64> {
        self.run(move |c| c.execute("DELETE FROM audit WHERE at_ms < ?1", params![before_ms]).map(|n| n as u64)).await
    }
}

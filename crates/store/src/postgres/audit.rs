//! The audit log on PostgreSQL: every replica's rows in one table, each naming its writer.

use std::sync::Arc;

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use toolgate_domain::StoreError;
use toolgate_domain::audit::{AuditEvent, AuditFilter};

use super::{PostgresStore, execute, pg, relaxed, rows};
use crate::AuditStore;

type Result<T> = std::result::Result<T, StoreError>;

#[async_trait]
impl AuditStore for PostgresStore {
    async fn append(&self, events: Arc<[AuditEvent]>, durable: bool) -> Result<()> {
        let column = |f: fn(&AuditEvent) -> Option<&str>| events.iter().map(f).collect::<Vec<_>>();
        let at: Vec<i64> = events.iter().map(|e| e.at_ms).collect();
        let action: Vec<&str> = events.iter().map(|e| e.action.as_str()).collect();
        let result: Vec<&str> = events.iter().map(|e| e.result.as_str()).collect();
        let (principal, token_id, target, detail, correlation_id, target_type) = (
            column(|e| e.principal.as_deref()),
            column(|e| e.token_id.as_deref()),
            column(|e| e.target.as_deref()),
            column(|e| e.detail.as_deref()),
            column(|e| e.correlation_id.as_deref()),
            column(|e| e.target_type.as_deref()),
        );
        pg(async {
            let mut c = self.conn().await?;
            // A batch nobody waits on does not wait for the disk; a state-changing call's does.
            let tx = if durable { c.transaction().await? } else { relaxed(&mut c).await? };
            // One statement for the whole batch: one round trip, however many rows.
            execute(
                &tx,
                "INSERT INTO audit (at_ms, principal, token_id, action, target, result, detail, correlation_id, target_type, replica)
                 SELECT *, $10 FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])",
                &[&at, &principal, &token_id, &action, &target, &result, &detail, &correlation_id, &target_type, &self.replica()],
            )
            .await?;
            Ok(tx.commit().await?)
        })
        .await
    }

    async fn query(&self, f: &AuditFilter) -> Result<Vec<AuditEvent>> {
        pg(async {
            let c = self.conn().await?;
            let found = rows(
                &*c,
                "SELECT at_ms, principal, token_id, action, target, result, detail, correlation_id, replica, target_type FROM audit
                 WHERE ($1::bigint IS NULL OR at_ms >= $1) AND ($2::bigint IS NULL OR at_ms <= $2)
                   AND ($3::text IS NULL OR principal = $3) AND ($4::text IS NULL OR starts_with(action, $4))
                   AND ($5::text IS NULL OR result = $5) AND ($6::text IS NULL OR correlation_id = $6)
                   AND ($8::text IS NULL OR target_type = $8)
                 ORDER BY id DESC LIMIT $7",
                &[&f.since_ms, &f.until_ms, &f.principal, &f.action_prefix, &f.result, &f.correlation_id, &f.limit, &f.target_type],
            )
            .await?;
            found
                .iter()
                .map(|r| {
                    Ok(AuditEvent {
                        at_ms: r.try_get(0)?,
                        principal: r.try_get(1)?,
                        token_id: r.try_get(2)?,
                        action: r.try_get(3)?,
                        target: r.try_get(4)?,
                        target_type: r.try_get(9)?,
                        result: r.try_get(5)?,
                        detail: r.try_get(6)?,
                        correlation_id: r.try_get(7)?,
                        replica: r.try_get(8)?,
                    })
                })
                .collect()
        })
        .await
    }

    async fn prune(&self, before_ms: i64) -> Result<u64> {
        pg(async { execute(&*self.conn().await?, "DELETE FROM audit WHERE at_ms < $1", &[&before_ms]).await }).await
    }
}

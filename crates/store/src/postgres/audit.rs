//! The audit log on PostgreSQL: every replica's rows in one table, each naming its writer.

use std::sync::Arc;

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use toolgate_domain::StoreError;
use toolgate_domain::audit::{AuditEvent, AuditFilter};

use super::confinement::{reach_agents, reach_param};
use super::{PostgresStore, execute, pg, relaxed, rows};
use crate::audit_writer::{agents_json, agents_of};
use crate::{AuditPage, AuditStore};

type Result<T> = std::result::Result<T, StoreError>;

/// The rows `f` asks for, as SQL after `SELECT … FROM audit`: `$7` is the limit, `$10` and
/// `$11` the confined reader (its own rows, and rows about agents that are all its own),
/// `$12` the id the rows are older than.
fn filtered() -> String {
    format!(
        "WHERE ($1::bigint IS NULL OR at_ms >= $1) AND ($2::bigint IS NULL OR at_ms <= $2)
           AND ($3::text IS NULL OR principal = $3) AND ($4::text IS NULL OR starts_with(action, $4))
           AND ($5::text IS NULL OR result = $5) AND ($6::text IS NULL OR correlation_id = $6)
           AND ($8::text IS NULL OR target_type = $8)
           AND ($9::text IS NULL OR agents @> jsonb_build_array($9::text))
           AND ($10::text IS NULL OR $11::text[] IS NULL OR principal = $10 OR (agents IS NOT NULL AND NOT EXISTS
                (SELECT 1 FROM jsonb_array_elements_text(audit.agents) j(id) WHERE j.id NOT IN ({}))))
           AND ($12::bigint IS NULL OR id < $12)",
        reach_agents(11)
    )
}

/// Runs `sql` (which holds [`filtered`]) with `f`'s parameters.
async fn with_filter(c: &impl GenericClient, sql: &str, f: &AuditFilter) -> super::Pg<Vec<tokio_postgres::Row>> {
    let reader = f.reader.as_ref().and_then(|r| reach_param(&r.reach).map(|groups| (&r.principal, groups)));
    let (me, groups) = reader.unzip();
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 12] = [
        &f.since_ms,
        &f.until_ms,
        &f.principal,
        &f.action_prefix,
        &f.result,
        &f.correlation_id,
        &f.limit,
        &f.target_type,
        &f.agent_id,
        &me,
        &groups,
        &f.before_id,
    ];
    rows(c, sql, &params).await
}

/// The rows, newest first, each with its id.
async fn select(c: &impl GenericClient, f: &AuditFilter) -> super::Pg<Vec<(i64, AuditEvent)>> {
    let sql = format!(
        "SELECT at_ms, principal, token_id, action, target, result, detail, correlation_id, replica, target_type, agents::text, id
         FROM audit {} ORDER BY id DESC LIMIT $7",
        filtered()
    );
    with_filter(c, &sql, f)
        .await?
        .iter()
        .map(|r| {
            let event = AuditEvent {
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
                agents: agents_of(r.try_get(10)?),
            };
            Ok((r.try_get(11)?, event))
        })
        .collect()
}

/// How many rows match, on every page (the limit aside: `$7` only keeps its place).
async fn count(c: &impl GenericClient, f: &AuditFilter) -> super::Pg<usize> {
    let sql = format!("SELECT COUNT(*) FROM audit {} AND ($7::bigint IS NULL OR TRUE)", filtered());
    let counted: i64 = with_filter(c, &sql, f).await?.first().map(|r| r.try_get(0)).transpose()?.unwrap_or(0);
    Ok(counted.max(0) as usize)
}

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
        let agents: Vec<Option<String>> = events.iter().map(|e| agents_json(&e.agents)).collect();
        pg(async {
            let mut c = self.conn().await?;
            // A batch nobody waits on does not wait for the disk; a state-changing call's does.
            let tx = if durable { c.transaction().await? } else { relaxed(&mut c).await? };
            // One statement for the whole batch: one round trip, however many rows.
            execute(
                &tx,
                "INSERT INTO audit (at_ms, principal, token_id, action, target, result, detail, correlation_id, target_type, agents, replica)
                 SELECT at_ms, principal, token_id, action, target, result, detail, correlation_id, target_type, agents::jsonb, $10
                 FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $11::text[])
                   AS u(at_ms, principal, token_id, action, target, result, detail, correlation_id, target_type, agents)",
                &[&at, &principal, &token_id, &action, &target, &result, &detail, &correlation_id, &target_type, &self.replica(), &agents],
            )
            .await?;
            Ok(tx.commit().await?)
        })
        .await
    }

    async fn query(&self, f: &AuditFilter) -> Result<Vec<AuditEvent>> {
        pg(async { Ok(select(&*self.conn().await?, f).await?.into_iter().map(|(_, event)| event).collect()) }).await
    }

    async fn page(&self, f: &AuditFilter) -> Result<AuditPage> {
        pg(async {
            let c = self.conn().await?;
            Ok(AuditPage { entries: select(&*c, f).await?, matched: count(&*c, f).await? })
        })
        .await
    }

    async fn prune(&self, before_ms: i64) -> Result<u64> {
        pg(async { execute(&*self.conn().await?, "DELETE FROM audit WHERE at_ms < $1", &[&before_ms]).await }).await
    }
}

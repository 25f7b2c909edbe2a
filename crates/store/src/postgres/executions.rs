//! An execution's header (with its targets counted by status) and its targets, as read back.

use deadpool_postgres::GenericClient;
use toolgate_domain::fleet::instruction::TargetStatus;

use super::confinement::readable;
use super::{Pg, PgError, PostgresStore, execute, row, rows};
use crate::Reader;
use crate::changes::Change;
use crate::fleet_work::state_condition;
use crate::fleet_work::{Created, ExecutionHeader, NewExecution, TargetRecord};
use crate::rollouts::RolloutState;
use crate::rules::existing_execution;

pub(super) fn status_of(text: &str) -> Pg<TargetStatus> {
    TargetStatus::parse(text).map_err(PgError::Invalid)
}

pub(super) const HEADER_COLUMNS: &str = "execution_id, kind, steps, scope, requested_by, created_at_ms, deadline_ms, cancelled_at_ms, rollout, released_wave";

pub(super) async fn header(c: &impl GenericClient, r: &tokio_postgres::Row) -> Pg<ExecutionHeader> {
    let execution_id: String = r.try_get(0)?;
    let counts: Vec<(TargetStatus, i64)> = rows(
        c,
        "SELECT status, count(*) FROM execution_target WHERE execution_id = $1 GROUP BY status ORDER BY status",
        &[&execution_id],
    )
    .await?
    .iter()
    .map(|r| Ok((status_of(r.try_get(0)?)?, r.try_get(1)?)))
    .collect::<Pg<_>>()?;
    let steps: String = r.try_get(2)?;
    Ok(ExecutionHeader {
        execution_id,
        kind: r.try_get(1)?,
        steps: serde_json::from_str(&steps)?,
        scope: r.try_get(3)?,
        requested_by: r.try_get(4)?,
        created_at_ms: r.try_get(5)?,
        deadline_ms: r.try_get(6)?,
        cancelled_at_ms: r.try_get(7)?,
        rollout: RolloutState::read(r.try_get::<_, Option<String>>(8)?.as_deref(), r.try_get(9)?, &counts)?,
        counts,
    })
}

pub(super) async fn headers(c: &impl GenericClient, found: Vec<tokio_postgres::Row>) -> Pg<Vec<ExecutionHeader>> {
    let mut out = Vec::with_capacity(found.len());
    for r in &found {
        out.push(header(c, r).await?);
    }
    Ok(out)
}

pub(super) fn target_row(r: &tokio_postgres::Row) -> Pg<TargetRecord> {
    Ok(TargetRecord {
        agent_id: r.try_get(0)?,
        status: status_of(r.try_get(1)?)?,
        error: r.try_get(2)?,
        updated_at_ms: r.try_get(3)?,
    })
}

pub(super) async fn targets(c: &impl GenericClient, execution_id: &str) -> Pg<Vec<TargetRecord>> {
    rows(
        c,
        "SELECT agent_id, status, error, updated_at_ms FROM execution_target WHERE execution_id = $1 ORDER BY agent_id",
        &[&execution_id],
    )
    .await?
    .iter()
    .map(target_row)
    .collect()
}

/// Creates the execution and its targets, each in its wave, in one transaction, unless its
/// idempotency key was used already by the same principal (then nothing is created).
pub(super) async fn create(store: &PostgresStore, e: &NewExecution, steps: &str, rollout: Option<&str>) -> Pg<Created> {
    let waves: Vec<i64> = e.waves().collect();
    let mut c = store.conn().await?;
    let tx = c.transaction().await?;
    let key = e.idempotency.as_ref().map(|i| i.key.as_str());
    let digest = e.idempotency.as_ref().map(|i| i.arguments_digest.as_str());
    // Under a key, a concurrent retry waits on the unique index and then finds this one.
    let inserted = execute(
        &tx,
        "INSERT INTO execution (execution_id, kind, steps, scope, requested_by, created_at_ms, deadline_ms, idempotency_key, arguments_digest, rollout)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
         ON CONFLICT (requested_by, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING",
        &[&e.execution_id, &e.kind, &steps, &e.scope, &e.requested_by, &e.created_at_ms, &e.deadline_ms, &key, &digest, &rollout],
    )
    .await?;
    if inserted == 0 {
        let found = row(
            &tx,
            "SELECT execution_id, arguments_digest FROM execution WHERE requested_by = $1 AND idempotency_key = $2",
            &[&e.requested_by, &key],
        )
        .await?
        .ok_or_else(|| PgError::Invalid("an idempotency key's execution vanished".into()))?;
        let digest_found: Option<String> = found.try_get(1)?;
        return Ok(existing_execution(found.try_get(0)?, digest_found.as_deref(), digest.unwrap_or("")));
    }
    execute(
        &tx,
        "INSERT INTO execution_target (execution_id, agent_id, status, updated_at_ms, wave)
         SELECT $1, a, 'pending', $3, w FROM unnest($2::text[], $4::bigint[]) AS t(a, w)",
        &[&e.execution_id, &e.targets, &e.created_at_ms, &waves],
    )
    .await?;
    store.notify(&tx, Change::ExecutionCreated(e.execution_id.clone())).await?;
    tx.commit().await?;
    Ok(Created::New)
}

pub(super) type Param<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);

/// The executions [`crate::WorkStore::executions`] lists, as a WHERE clause and its parameters: a
/// step names its definition in the steps JSON (the pattern is bound, never spliced), and
/// only those `reader` may read.
pub(super) fn executions_filter<'a>(
    pattern: &'a Option<String>,
    state: &'a Option<&'static str>,
    reader: Option<&'a Reader>,
    groups: &'a Option<Vec<String>>,
) -> (String, Vec<Param<'a>>) {
    let (confined, extra) = readable("execution.execution_id", reader, groups, 3);
    let sql = format!("WHERE ($1::text IS NULL OR steps LIKE $1) AND ({}){confined}", state_condition("$2::text"));
    let mut params: Vec<Param<'a>> = vec![pattern, state];
    params.extend(extra);
    (sql, params)
}

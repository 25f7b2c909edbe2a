//! An execution's header (with its targets counted by status) and its targets, as read back.

use deadpool_postgres::GenericClient;
use toolgate_domain::fleet::instruction::TargetStatus;

use super::{Pg, PgError, rows};
use crate::fleet_work::{ExecutionHeader, TargetRecord};
use crate::rollouts::RolloutState;

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

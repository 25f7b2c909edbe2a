//! Execution headers, targets and the creation of an execution (once under an idempotency
//! key) in SQLite, as `postgres/executions.rs` has them for PostgreSQL.

use rusqlite::{Connection, OptionalExtension, params};
use toolgate_domain::fleet::instruction::TargetStatus;
use toolgate_domain::fleet::wire::{RunOrder, RunStep};

use super::confinement::readable;
use crate::Reader;
use crate::fleet_work::state_condition;
use crate::fleet_work::{Created, ExecutionHeader, NewExecution, TargetRecord};
use crate::rollouts::RolloutState;
use crate::rules::existing_execution;
use toolgate_domain::fleet::instruction::ExecutionState;

pub(super) fn status_of(text: &str) -> rusqlite::Result<TargetStatus> {
    TargetStatus::parse(text).map_err(rusqlite::Error::InvalidColumnName)
}

pub(super) fn steps_of(text: &str) -> rusqlite::Result<Vec<RunStep>> {
    serde_json::from_str(text)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, e.into()))
}

pub(super) const HEADER_COLUMNS: &str = "execution_id, kind, steps, scope, requested_by, created_at_ms, deadline_ms, cancelled_at_ms, rollout, released_wave";

pub(super) fn header(c: &Connection, r: &rusqlite::Row) -> rusqlite::Result<ExecutionHeader> {
    let execution_id: String = r.get(0)?;
    let mut stmt = c.prepare_cached(
        "SELECT status, count(*) FROM execution_target WHERE execution_id = ?1 GROUP BY status ORDER BY status",
    )?;
    let counts: Vec<(TargetStatus, i64)> = stmt
        .query_map(params![execution_id], |r| Ok((status_of(&r.get::<_, String>(0)?)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(ExecutionHeader {
        execution_id,
        kind: r.get(1)?,
        steps: steps_of(&r.get::<_, String>(2)?)?,
        scope: r.get(3)?,
        requested_by: r.get(4)?,
        created_at_ms: r.get(5)?,
        deadline_ms: r.get(6)?,
        cancelled_at_ms: r.get(7)?,
        rollout: RolloutState::read(r.get::<_, Option<String>>(8)?.as_deref(), r.get(9)?, &counts)
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(8, rusqlite::types::Type::Text, Box::new(e)))?,
        counts,
    })
}

pub(super) fn target_row(r: &rusqlite::Row) -> rusqlite::Result<TargetRecord> {
    Ok(TargetRecord {
        agent_id: r.get(0)?,
        status: status_of(&r.get::<_, String>(1)?)?,
        error: r.get(2)?,
        updated_at_ms: r.get(3)?,
    })
}

pub(super) fn targets(c: &Connection, execution_id: &str) -> rusqlite::Result<Vec<TargetRecord>> {
    let mut stmt = c.prepare_cached(
        "SELECT agent_id, status, error, updated_at_ms FROM execution_target WHERE execution_id = ?1 ORDER BY agent_id",
    )?;
    stmt.query_map(params![execution_id], target_row)?.collect()
}

pub(super) fn create(c: &mut Connection, e: &NewExecution) -> rusqlite::Result<Created> {
    let steps = serde_json::to_string(&e.steps).expect("run steps serialize");
    let tx = c.transaction()?;
    let (key, digest) = (e.idempotency.as_ref().map(|i| &i.key), e.idempotency.as_ref().map(|i| &i.arguments_digest));
    if let (Some(key), Some(wanted)) = (key, digest) {
        let found: Option<(String, Option<String>)> = tx
            .query_row(
                "SELECT execution_id, arguments_digest FROM execution WHERE requested_by = ?1 AND idempotency_key = ?2",
                params![e.requested_by, key],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        if let Some((execution_id, found)) = found {
            return Ok(existing_execution(execution_id, found.as_deref(), wanted));
        }
    }
    let rollout = e.rollout.map(|r| serde_json::to_string(&r).expect("a rollout serializes"));
    tx.execute(
        "INSERT INTO execution (execution_id, kind, steps, scope, requested_by, created_at_ms, deadline_ms, idempotency_key, arguments_digest, rollout) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![e.execution_id, e.kind, steps, e.scope, e.requested_by, e.created_at_ms, e.deadline_ms, key, digest, rollout],
    )?;
    {
        let mut insert = tx.prepare_cached(
            "INSERT INTO execution_target (execution_id, agent_id, status, updated_at_ms, wave) VALUES (?1, ?2, 'pending', ?3, ?4)",
        )?;
        for (agent_id, wave) in e.targets.iter().zip(e.waves()) {
            insert.execute(params![e.execution_id, agent_id, e.created_at_ms, wave])?;
        }
    }
    tx.commit()?;
    Ok(Created::New)
}

/// The run of an execution neither cancelled nor past `now_ms`, and its targets of released
/// waves not yet sent it.
pub(super) fn undelivered(
    c: &Connection,
    execution_id: &str,
    now_ms: i64,
) -> rusqlite::Result<Option<(RunOrder, Vec<String>)>> {
    let order = c
        .query_row(
            "SELECT execution_id, deadline_ms, steps, released_wave FROM execution
             WHERE execution_id = ?1 AND cancelled_at_ms IS NULL AND deadline_ms > ?2",
            params![execution_id, now_ms],
            |r| {
                let order = RunOrder {
                    execution_id: r.get(0)?,
                    deadline_ms: r.get(1)?,
                    steps: steps_of(&r.get::<_, String>(2)?)?,
                };
                Ok((order, r.get::<_, i64>(3)?))
            },
        )
        .optional()?;
    let Some((order, released_wave)) = order else { return Ok(None) };
    let mut stmt = c.prepare_cached(
        "SELECT agent_id FROM execution_target WHERE execution_id = ?1 AND status = 'pending' AND wave <= ?2 ORDER BY agent_id",
    )?;
    let targets =
        stmt.query_map(params![execution_id, released_wave], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
    Ok(Some((order, targets)))
}

/// The executions [`crate::WorkStore::executions`] lists, as a WHERE clause and its values: a step
/// names its definition in the steps JSON (the pattern is bound, never spliced), and only
/// those `reader` may read.
pub(super) fn executions_filter(
    definition: Option<&str>,
    state: Option<ExecutionState>,
    reader: Option<&Reader>,
) -> (String, Vec<rusqlite::types::Value>) {
    let pattern = definition.map(crate::by_definition::steps_pattern);
    let state = state.map(ExecutionState::as_str);
    let (readable, confined) = readable("execution.execution_id", reader);
    let mut values: Vec<rusqlite::types::Value> =
        vec![pattern.clone().into(), pattern.into(), state.map(str::to_string).into()];
    values.extend(confined);
    let sql = format!("WHERE (? IS NULL OR steps LIKE ?) AND ({}){readable}", state_condition("?3"));
    (sql, values)
}

//! The audit log in SQLite: rows appended in batches (an fsync only when a caller waits on
//! one), read back newest first, pruned by age. The table has no index but its row id: every
//! call writes a row, and readers walk it by id.

use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::params;
use toolgate_domain::StoreError;
use toolgate_domain::audit::{AuditEvent, AuditFilter};

use super::confinement::{reach_agents, reach_param};
use super::{SqliteStore, without_fsync};
use crate::audit_writer::{agents_json, agents_of};
use crate::{AuditPage, AuditStore};

type Result<T> = std::result::Result<T, StoreError>;

fn append_rows(c: &mut rusqlite::Connection, events: &[AuditEvent]) -> rusqlite::Result<()> {
    let tx = c.transaction()?;
    {
        let mut stmt = tx.prepare_cached(
            "INSERT INTO audit (at_ms, principal, token_id, action, target, result, detail, correlation_id, target_type, agents) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
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
                e.target_type,
                agents_json(&e.agents)
            ])?;
        }
    }
    tx.commit()
}

/// Rows one retention statement looks at.
const PRUNE_CHUNK: i64 = 10_000;

/// Deletes the rows older than `before_ms` among the `PRUNE_CHUNK` oldest after `after_id`;
/// returns how many, and the chunk's last id (none when no row is left after `after_id`).
fn prune_chunk(c: &mut rusqlite::Connection, after_id: i64, before_ms: i64) -> rusqlite::Result<(u64, Option<i64>)> {
    let last: Option<i64> = c.query_row(
        "SELECT max(id) FROM (SELECT id FROM audit WHERE id > ?1 ORDER BY id LIMIT ?2)",
        params![after_id, PRUNE_CHUNK],
        |r| r.get(0),
    )?;
    let Some(last) = last else { return Ok((0, None)) };
    let deleted =
        c.execute("DELETE FROM audit WHERE id > ?1 AND id <= ?2 AND at_ms < ?3", params![after_id, last, before_ms])?;
    Ok((deleted as u64, Some(last)))
}

/// A confined reader's condition: its own rows, and rows about agents that are all its own.
fn readable_rows(groups: &str) -> String {
    format!(
        "(principal = ?10 OR (agents IS NOT NULL AND NOT EXISTS \
         (SELECT 1 FROM json_each(audit.agents) j WHERE j.value NOT IN ({}))))",
        reach_agents(groups)
    )
}

/// The rows `f` asks for, as SQL after `SELECT … FROM audit`, and its parameters: `?7` is the
/// limit, `?10` and `?11` the confined reader, `?12` the id the rows are older than.
fn filtered(f: &AuditFilter) -> (String, impl rusqlite::Params) {
    let reader = f.reader.as_ref().and_then(|r| reach_param(&r.reach).map(|groups| (r.principal.clone(), groups)));
    let confined = match reader {
        Some(_) => readable_rows("?11"),
        None => "1".into(),
    };
    let (me, groups) = reader.unzip();
    let sql = format!(
        "WHERE (?1 IS NULL OR at_ms >= ?1) AND (?2 IS NULL OR at_ms <= ?2) AND (?3 IS NULL OR principal = ?3)
           AND (?4 IS NULL OR substr(action, 1, length(?4)) = ?4) AND (?5 IS NULL OR result = ?5)
           AND (?6 IS NULL OR correlation_id = ?6) AND (?8 IS NULL OR target_type = ?8)
           AND (?9 IS NULL OR EXISTS (SELECT 1 FROM json_each(audit.agents) j WHERE j.value = ?9))
           AND (?10 IS NULL OR ?11 IS NULL OR {confined}) AND (?12 IS NULL OR id < ?12)"
    );
    let params = (
        f.since_ms,
        f.until_ms,
        f.principal.clone(),
        f.action_prefix.clone(),
        f.result.clone(),
        f.correlation_id.clone(),
        f.limit,
        f.target_type.clone(),
        f.agent_id.clone(),
        me,
        groups,
        f.before_id,
    );
    (sql, params)
}

/// The rows, newest first, each with its id.
fn select(c: &rusqlite::Connection, f: &AuditFilter) -> rusqlite::Result<Vec<(i64, AuditEvent)>> {
    let (filter, params) = filtered(f);
    let mut stmt = c.prepare_cached(&format!(
        "SELECT at_ms, principal, token_id, action, target, result, detail, correlation_id, target_type, agents, id
         FROM audit {filter} ORDER BY id DESC LIMIT ?7"
    ))?;
    let rows = stmt.query_map(params, |r| {
        let event = AuditEvent {
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
            agents: agents_of(r.get(9)?),
        };
        Ok((r.get(10)?, event))
    })?;
    rows.collect()
}

/// How many rows match, on every page (the limit aside).
fn count(c: &rusqlite::Connection, f: &AuditFilter) -> rusqlite::Result<usize> {
    let (filter, params) = filtered(f);
    // ?7 (the limit) is not used by the count; naming it keeps the numbering.
    let sql = format!("SELECT COUNT(*) FROM audit {filter} AND (?7 IS NULL OR 1)");
    let counted: i64 = c.prepare_cached(&sql)?.query_row(params, |r| r.get(0))?;
    Ok(counted.max(0) as usize)
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
        self.run(move |c| Ok(select(c, &f)?.into_iter().map(|(_, event)| event).collect())).await
    }

    async fn page(&self, f: &AuditFilter) -> Result<AuditPage> {
        let f = f.clone();
        self.run(move |c| Ok(AuditPage { entries: select(c, &f)?, matched: count(c, &f)? })).await
    }

    async fn prune(&self, before_ms: i64) -> Result<u64> {
        // Oldest first, a chunk at a time, each its own statement: the writer's appends go on
        // between chunks, and no index on the time is needed. Rows come in nearly in time
        // order, so the first chunk with nothing to delete ends the walk; a row a few
        // milliseconds out of order there waits for the next run, and a row stamped in the
        // future (a clock set back) is kept without holding up the rows after it.
        let (mut after_id, mut deleted) = (0, 0);
        loop {
            let (n, last) = self.run(move |c| prune_chunk(c, after_id, before_ms)).await?;
            deleted += n;
            match last {
                Some(last) if n > 0 => after_id = last,
                _ => return Ok(deleted),
            }
        }
    }
}

//! An agent's result (its steps and rows) stored in one transaction, and rows read back with
//! the conditions in SQL.

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;
use toolgate_domain::fleet::instruction::target_status;
use toolgate_domain::fleet::wire::RunResult;

use super::json_rows::{json_path, push_conditions};
use crate::GroupOrder;
use crate::fleet_work::{Group, ResponsePage, ResponseQuery, ResponseRow, Taken, number};
use crate::rules::result_refusal;
use crate::{ColumnCondition, Reader};
use rusqlite::types::Value as SqlValue;
use toolgate_domain::fleet::instruction::TargetStatus;

pub(super) fn store_result(
    c: &mut Connection,
    agent_id: &str,
    result: &RunResult,
    now_ms: i64,
) -> rusqlite::Result<Taken> {
    let tx = c.transaction()?;
    // The rows' arrival numbers, taken first (the execution row before its targets, as a
    // cancellation takes them); a refused result rolls them back with everything else.
    let rows: i64 = result.steps.iter().map(|s| s.rows.len() as i64).sum();
    let received: Option<i64> = tx
        .query_row(
            "UPDATE execution SET responses_received = responses_received + ?2 WHERE execution_id = ?1 RETURNING responses_received",
            params![result.execution_id, rows],
            |r| r.get(0),
        )
        .optional()?;
    let Some(received) = received else { return Ok(Taken::Unknown) };
    let mut arrival = received - rows;
    let known: Option<String> = tx
        .query_row(
            "SELECT status FROM execution_target WHERE execution_id = ?1 AND agent_id = ?2",
            params![result.execution_id, agent_id],
            |r| r.get(0),
        )
        .optional()?;
    let Some(status) = known else { return Ok(Taken::Unknown) };
    let stored: i64 = tx.query_row(
        "SELECT count(*) FROM execution_step WHERE execution_id = ?1 AND agent_id = ?2",
        params![result.execution_id, agent_id],
        |r| r.get(0),
    )?;
    if let Some(refusal) = result_refusal(&status, stored) {
        return Ok(refusal);
    }
    {
        let mut step_insert = tx.prepare_cached(
            "INSERT INTO execution_step (execution_id, agent_id, step, status, error, row_count) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        let mut row_insert = tx.prepare_cached(
            "INSERT INTO response (execution_id, step, agent_id, row_index, row, arrival) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        for (i, step) in result.steps.iter().enumerate() {
            step_insert.execute(params![
                result.execution_id,
                agent_id,
                i as i64,
                step.status.as_str(),
                step.error,
                step.rows.len() as i64
            ])?;
            for (j, row) in step.rows.iter().enumerate() {
                let text = serde_json::to_string(row).expect("a row serializes");
                arrival += 1;
                row_insert.execute(params![result.execution_id, i as i64, agent_id, j as i64, text, arrival])?;
            }
        }
    }
    let statuses: Vec<_> = result.steps.iter().map(|s| s.status).collect();
    let error = result.steps.iter().find_map(|s| s.error.clone());
    tx.execute(
        "UPDATE execution_target SET status = ?3, error = ?4, updated_at_ms = ?5 WHERE execution_id = ?1 AND agent_id = ?2",
        params![result.execution_id, agent_id, target_status(&statuses).as_str(), error, now_ms],
    )?;
    tx.commit()?;
    Ok(Taken::Stored)
}

/// What every read of responses narrows its own rows by: one agent, the target's status, the
/// reader's confinement and the column conditions.
pub(super) struct Narrowing<'a> {
    pub agent_id: Option<&'a str>,
    pub status: Option<TargetStatus>,
    pub reader: Option<&'a Reader>,
    pub conditions: &'a [ColumnCondition],
}

impl Narrowing<'_> {
    /// Appends the narrowing to `sql` (whose tables are `response r` and `execution_target t`)
    /// and its values, then `order` and the page's limit: one row more than asked, to tell
    /// whether more match.
    pub(super) fn finish(
        &self,
        sql: &mut String,
        values: &mut Vec<SqlValue>,
        order: &str,
        limit: usize,
    ) -> rusqlite::Result<()> {
        self.narrow(sql, values)?;
        sql.push_str(&format!(" ORDER BY {order} LIMIT ?"));
        values.push((limit as i64 + 1).into());
        Ok(())
    }

    /// How many rows `from_where` (`FROM response r JOIN execution_target t … WHERE …`, with
    /// its `values`) holds, narrowed: every page's, the rows themselves never read.
    pub(super) fn count(&self, c: &Connection, from_where: &str, mut values: Vec<SqlValue>) -> rusqlite::Result<usize> {
        let mut sql = format!("SELECT COUNT(*) {from_where}");
        self.narrow(&mut sql, &mut values)?;
        let counted: i64 = c.prepare_cached(&sql)?.query_row(rusqlite::params_from_iter(values), |r| r.get(0))?;
        Ok(counted.max(0) as usize)
    }

    fn narrow(&self, sql: &mut String, values: &mut Vec<SqlValue>) -> rusqlite::Result<()> {
        let (agent, status) = (self.agent_id.map(str::to_string), self.status.map(|s| s.as_str().to_string()));
        sql.push_str(" AND (? IS NULL OR r.agent_id = ?) AND (? IS NULL OR t.status = ?)");
        values.extend([agent.clone().into(), agent.into(), status.clone().into(), status.into()]);
        let (confined, confined_values) = super::confinement::readable("r.execution_id", self.reader);
        sql.push_str(&confined);
        values.extend(confined_values);
        push_conditions(self.conditions, sql, values)
    }
}

pub(super) fn responses(c: &Connection, q: &ResponseQuery) -> rusqlite::Result<ResponsePage> {
    const FROM_WHERE: &str = "FROM response r JOIN execution_target t ON t.execution_id = r.execution_id AND t.agent_id = r.agent_id \
         WHERE r.execution_id = ? AND r.step = ? AND r.arrival > ?";
    let mut values: Vec<SqlValue> = vec![q.execution_id.clone().into(), (q.step as i64).into(), q.after.into()];
    let narrowing = Narrowing {
        agent_id: q.agent_id.as_deref(),
        status: q.status,
        reader: q.reader.as_ref(),
        conditions: &q.conditions,
    };
    let matched = narrowing.count(c, FROM_WHERE, values.clone())?;
    let mut sql = format!("SELECT r.agent_id, r.row, r.arrival {FROM_WHERE}");
    narrowing.finish(&mut sql, &mut values, "r.arrival", q.limit)?;
    let mut stmt = c.prepare_cached(&sql)?;
    let mut rows: Vec<ResponseRow> = stmt
        .query_map(rusqlite::params_from_iter(values), |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?))
        })?
        .filter_map(|r| {
            r.map(|(agent_id, text, arrival)| {
                serde_json::from_str(&text).ok().map(|values| ResponseRow { agent_id, values, arrival })
            })
            .transpose()
        })
        .collect::<rusqlite::Result<_>>()?;
    let more = rows.len() > q.limit;
    rows.truncate(q.limit);
    Ok(ResponsePage { rows, more, matched })
}

pub(super) fn sql_value(v: rusqlite::types::Value) -> Value {
    use rusqlite::types::Value as V;
    match v {
        V::Null => Value::Null,
        V::Integer(i) => Value::from(i),
        V::Real(f) => Value::from(f),
        V::Text(t) => Value::from(t),
        V::Blob(_) => Value::Null,
    }
}

/// Groups of the rows `source` (a condition on `response`, with its `values`, the limit
/// last) by one column, with the min, max, sum and average of another.
pub(super) fn aggregate(
    c: &Connection,
    group_by: &str,
    of: Option<&str>,
    order: GroupOrder,
    source: &str,
    values: Vec<SqlValue>,
) -> rusqlite::Result<Vec<Group>> {
    let group = json_path(group_by)?;
    let measure = match of {
        Some(column) => format!("json_extract(row, '{}')", json_path(column)?),
        None => "NULL".into(),
    };
    let numeric = format!("CASE WHEN typeof({measure}) IN ('integer', 'real') THEN {measure} END");
    let sql = format!(
        "SELECT json_extract(row, '{group}') g, count(*), min({measure}), max({measure}), \
         CAST(sum({numeric}) AS REAL), avg({numeric}) FROM response \
         WHERE {source} GROUP BY g ORDER BY {} LIMIT ?",
        order.order_by()
    );
    let mut stmt = c.prepare(&sql)?;
    stmt.query_map(rusqlite::params_from_iter(values), |r| {
        Ok(Group {
            value: sql_value(r.get(0)?),
            count: r.get(1)?,
            min: sql_value(r.get(2)?),
            max: sql_value(r.get(3)?),
            sum: number(r.get(4)?),
            avg: number(r.get(5)?),
        })
    })?
    .collect()
}

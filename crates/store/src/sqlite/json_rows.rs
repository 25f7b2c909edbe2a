//! Rows kept as JSON text (inventory rows, responses): conditions written as SQL on them
//! (`json_extract`), pages cut in SQL or, with a filter left for Rust, read in chunks
//! (`crate::filtered`).

use rusqlite::Connection;
use serde_json::{Map, Value};

use super::confinement::{reach_agents, reach_param};
use crate::filtered::{CHUNK_ROWS, Chunk, Cursor};
use crate::{ColumnCondition, ColumnValue, RowPage, RowSource};

/// Appends ` AND json_extract(row, '$.column') = ?` per condition, binding the values.
pub(super) fn push_conditions(
    conditions: &[ColumnCondition],
    sql: &mut String,
    values: &mut Vec<rusqlite::types::Value>,
) -> rusqlite::Result<()> {
    for condition in conditions {
        // The path is written into the SQL (not bound) so that the expression indexes of
        // 0008_inventory_indexes apply; a column is a declared name, checked again here.
        json_path(&condition.column)?;
        let op = if condition.equal { "=" } else { "!=" };
        sql.push_str(&format!(" AND json_extract(row, '$.{}') {op} ?", condition.column));
        values.push(match &condition.value {
            ColumnValue::Text(text) => text.clone().into(),
            ColumnValue::Integer(n) => (*n).into(),
        });
    }
    Ok(())
}

/// A column name fit to be written into a JSON path: declared names only.
pub(super) fn json_path(column: &str) -> rusqlite::Result<String> {
    if column.is_empty() || !column.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
        return Err(rusqlite::Error::InvalidColumnName(column.to_string()));
    }
    Ok(format!("$.{column}"))
}

/// The inventory rows of `table` (one agent's, or every agent's) that meet the conditions, as
/// SQL with the values bound, in (agent id, rowid) order.
fn select(
    source: &RowSource,
    conditions: &[ColumnCondition],
) -> rusqlite::Result<(String, Vec<rusqlite::types::Value>)> {
    matching("SELECT rowid, agent_id, row FROM inventory_row", source, conditions)
}

/// How many rows match: without conditions, the counts each agent's report stored beside its
/// rows (one per agent, not one per row: a fleet's users table is 240,000 rows).
fn count(c: &Connection, source: &RowSource, conditions: &[ColumnCondition]) -> rusqlite::Result<usize> {
    let what = match conditions.is_empty() {
        true => "SELECT COALESCE(SUM(row_count), 0) FROM inventory_table",
        false => "SELECT COUNT(*) FROM inventory_row",
    };
    let (sql, values) = matching(what, source, conditions)?;
    let counted: i64 = c.prepare_cached(&sql)?.query_row(rusqlite::params_from_iter(values), |r| r.get(0))?;
    Ok(counted.max(0) as usize)
}

/// `what` (a SELECT … FROM a table with `table_name` and `agent_id`) of the rows of the
/// source's table, agent and reach that meet the conditions.
fn matching(
    what: &str,
    source: &RowSource,
    conditions: &[ColumnCondition],
) -> rusqlite::Result<(String, Vec<rusqlite::types::Value>)> {
    let mut sql = format!("{what} WHERE table_name = ? AND (? IS NULL OR agent_id = ?)");
    let agent_id = source.agent_id.clone();
    let mut values: Vec<rusqlite::types::Value> =
        vec![source.table.clone().into(), agent_id.clone().into(), agent_id.into()];
    if let Some(groups) = reach_param(&source.reach) {
        sql.push_str(&format!(" AND agent_id IN ({})", reach_agents("?")));
        values.push(groups.into());
    }
    push_conditions(conditions, &mut sql, &mut values)?;
    Ok((sql, values))
}

/// Runs a select, decoding each row (a row that is not a JSON object cannot have been written
/// by this store, and is passed over).
fn read(c: &Connection, sql: &str, values: Vec<rusqlite::types::Value>) -> rusqlite::Result<Chunk> {
    let mut stmt = c.prepare_cached(sql)?;
    let mut rows = stmt.query(rusqlite::params_from_iter(values))?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let text: String = r.get(2)?;
        if let Ok(row) = serde_json::from_str::<Map<String, Value>>(&text) {
            out.push((r.get(0)?, r.get(1)?, row));
        }
    }
    Ok(out)
}

/// A page of rows, cut in SQL: a deep page costs no decoding of the rows before it.
pub(super) fn page(
    c: &Connection,
    source: &RowSource,
    conditions: &[ColumnCondition],
    offset: usize,
    limit: usize,
) -> rusqlite::Result<RowPage> {
    let matched = count(c, source, conditions)?;
    let (mut sql, mut values) = select(source, conditions)?;
    sql.push_str(" ORDER BY agent_id, rowid LIMIT ? OFFSET ?");
    values.push((limit as i64).into());
    values.push((offset as i64).into());
    let rows: Vec<(String, Map<String, Value>)> =
        read(c, &sql, values)?.into_iter().map(|(_, agent, row)| (agent, row)).collect();
    Ok(RowPage { more: matched > offset + rows.len(), rows, matched, counted_all: true, over_budget: false })
}

/// The next [`CHUNK_ROWS`] rows after `after`, for a filter that runs outside the store.
pub(super) fn chunk(
    c: &Connection,
    source: &RowSource,
    conditions: &[ColumnCondition],
    after: Option<Cursor>,
) -> rusqlite::Result<Chunk> {
    let (mut sql, mut values) = select(source, conditions)?;
    if let Some((agent, key)) = after {
        sql.push_str(" AND (agent_id, rowid) > (?, ?)");
        values.push(agent.into());
        values.push(key.into());
    }
    sql.push_str(" ORDER BY agent_id, rowid LIMIT ?");
    values.push((CHUNK_ROWS as i64).into());
    read(c, &sql, values)
}

//! Rows kept as JSON text (inventory rows, responses): conditions written as SQL on them
//! (`json_extract`), pages cut in SQL or, with a filter left for Rust, while reading.

use rusqlite::Connection;
use serde_json::{Map, Value};

use crate::traits::Paging;
use crate::{ColumnCondition, ColumnValue, RowFilter, RowPage};

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

/// Reads a page of rows. The conditions become SQL (`json_extract` on the row, the value bound
/// as a parameter); when there is no filter left for Rust, SQL
/// does the paging too, so a deep page costs no decoding of the rows before it.
pub(super) fn scan(
    c: &mut Connection,
    table: &str,
    agent_id: Option<&str>,
    conditions: &[ColumnCondition],
    filter: Option<RowFilter>,
    offset: usize,
    limit: usize,
) -> rusqlite::Result<RowPage> {
    let mut sql =
        String::from("SELECT agent_id, row FROM inventory_row WHERE table_name = ? AND (? IS NULL OR agent_id = ?)");
    let mut values: Vec<rusqlite::types::Value> =
        vec![table.to_string().into(), agent_id.map(str::to_string).into(), agent_id.map(str::to_string).into()];
    push_conditions(conditions, &mut sql, &mut values)?;
    sql.push_str(" ORDER BY agent_id, rowid");
    let in_sql = filter.is_none();
    if in_sql {
        // One more than the page: whether there is a next one.
        sql.push_str(" LIMIT ? OFFSET ?");
        values.push((limit as i64 + 1).into());
        values.push((offset as i64).into());
    }
    let mut stmt = c.prepare_cached(&sql)?;
    let mut rows = stmt.query(rusqlite::params_from_iter(values))?;
    // With a filter left for Rust, the offset counts the rows it keeps: skipped here.
    let mut paging = Paging::new(filter, if in_sql { 0 } else { offset }, limit);
    while let Some(r) = rows.next()? {
        let text: String = r.get(1)?;
        // A row that is not a JSON object cannot have been written by this store.
        let Ok(row) = serde_json::from_str::<Map<String, Value>>(&text) else { continue };
        if !paging.offer(r.get(0)?, row) {
            break;
        }
    }
    Ok(paging.finish())
}

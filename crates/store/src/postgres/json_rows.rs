//! Rows kept as JSONB (inventory rows, responses): conditions written as SQL on them, pages
//! cut in SQL or, with a filter left for Rust, while reading.

use deadpool_postgres::GenericClient;
use serde_json::{Map, Value};
use tokio_postgres::types::ToSql;

use super::{Pg, PgError, rows};
use crate::traits::Paging;
use crate::{ColumnCondition, ColumnValue, RowFilter, RowPage};

/// A column name fit to be written into SQL: declared names only (checked again here).
pub(super) fn json_key(column: &str) -> Pg<&str> {
    if column.is_empty() || !column.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
        return Err(PgError::Invalid(format!("{column:?} is not a column name")));
    }
    Ok(column)
}

/// The conditions as SQL on the JSONB `row` of `alias`, values bound from `$first` on. The key
/// is written into the SQL (not bound) so that the expression indexes on `row -> 'name'` and
/// `row -> 'port'` apply. A JSON null or a missing key matches neither = nor != (as in SQL).
pub(super) fn conditions_sql(conditions: &[ColumnCondition], alias: &str, first: usize) -> Pg<(String, Vec<Value>)> {
    let (mut sql, mut values) = (String::new(), Vec::new());
    for (i, condition) in conditions.iter().enumerate() {
        let key = json_key(&condition.column)?;
        let n = first + i;
        if condition.equal {
            sql.push_str(&format!(" AND {alias}row -> '{key}' = ${n}"));
        } else {
            sql.push_str(&format!(" AND {alias}row -> '{key}' <> ${n} AND {alias}row -> '{key}' <> 'null'::jsonb"));
        }
        values.push(match &condition.value {
            ColumnValue::Text(text) => Value::from(text.as_str()),
            ColumnValue::Integer(n) => Value::from(*n),
        });
    }
    Ok((sql, values))
}

/// Reads a page of rows: conditions in SQL, and the paging too unless a filter is left for Rust.
pub(super) async fn scan(
    c: &impl GenericClient,
    table: &str,
    agent_id: Option<&str>,
    conditions: &[ColumnCondition],
    filter: Option<RowFilter>,
    offset: usize,
    limit: usize,
) -> Pg<RowPage> {
    let (where_sql, values) = conditions_sql(conditions, "", 3)?;
    let mut sql = format!(
        "SELECT agent_id, row FROM inventory_row WHERE table_name = $1 AND ($2::text IS NULL OR agent_id = $2){where_sql} ORDER BY agent_id, id"
    );
    let in_sql = filter.is_none();
    let (page_limit, page_offset) = (limit as i64 + 1, offset as i64);
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&table, &agent_id];
    params.extend(values.iter().map(|v| v as &(dyn ToSql + Sync)));
    if in_sql {
        // One more than the page: whether there is a next one.
        sql.push_str(&format!(" LIMIT ${} OFFSET ${}", params.len() + 1, params.len() + 2));
        params.push(&page_limit);
        params.push(&page_offset);
    }
    // With a filter left for Rust, the offset counts the rows it keeps: skipped here.
    let mut paging = Paging::new(filter, if in_sql { 0 } else { offset }, limit);
    for r in rows(c, &sql, &params).await? {
        let Value::Object(found) = r.try_get::<_, Value>(1)? else { continue };
        if !paging.offer(r.try_get(0)?, found) {
            break;
        }
    }
    Ok(paging.finish())
}

/// The rows of a JSONB column, as objects (anything else cannot have been written here).
pub(super) fn objects(found: Vec<tokio_postgres::Row>) -> Pg<Vec<(String, Map<String, Value>)>> {
    let mut out = Vec::with_capacity(found.len());
    for r in found {
        if let Value::Object(object) = r.try_get::<_, Value>(1)? {
            out.push((r.try_get(0)?, object));
        }
    }
    Ok(out)
}

//! Rows kept as JSONB (inventory rows, responses): conditions written as SQL on them, pages
//! cut in SQL or, with a filter left for Rust, read in chunks (`crate::filtered`).

use deadpool_postgres::GenericClient;
use serde_json::{Map, Value};
use tokio_postgres::types::ToSql;

use super::confinement::{reach_agents, reach_param};
use super::{Pg, PgError, rows};
use crate::filtered::{CHUNK_ROWS, Chunk, Cursor};
use crate::{ColumnCondition, ColumnValue, RowPage, RowSource};

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

/// The inventory rows of `table` (one agent's, or every agent's) that meet the conditions, with
/// `extra` SQL after them, in (agent id, id) order; the extra parameters come after the
/// conditions'. Each row: its id, agent id and columns.
async fn select(
    c: &impl GenericClient,
    source: &RowSource,
    conditions: &[ColumnCondition],
    extra: impl FnOnce(usize) -> String,
    extra_params: &[&(dyn ToSql + Sync)],
) -> Pg<Chunk> {
    let mut out = Vec::new();
    for r in matching(c, "SELECT id, agent_id, row FROM inventory_row", source, conditions, extra, extra_params).await?
    {
        if let Value::Object(found) = r.try_get::<_, Value>(2)? {
            out.push((r.try_get(0)?, r.try_get(1)?, found));
        }
    }
    Ok(out)
}

/// How many rows of `table` meet the conditions: without conditions, the counts each agent's
/// report stored beside its rows (one per agent, not one per row).
async fn count(c: &impl GenericClient, source: &RowSource, conditions: &[ColumnCondition]) -> Pg<usize> {
    let what = match conditions.is_empty() {
        true => "SELECT COALESCE(SUM(row_count), 0)::bigint FROM inventory_table",
        false => "SELECT COUNT(*) FROM inventory_row",
    };
    let found = matching(c, what, source, conditions, |_| String::new(), &[]).await?;
    let counted: i64 = found.first().map(|r| r.try_get(0)).transpose()?.unwrap_or(0);
    Ok(counted.max(0) as usize)
}

/// `what` (a SELECT … FROM a table with `table_name` and `agent_id`) of the rows that meet the
/// conditions, confined to the source's reach.
async fn matching(
    c: &impl GenericClient,
    what: &str,
    source: &RowSource,
    conditions: &[ColumnCondition],
    extra: impl FnOnce(usize) -> String,
    extra_params: &[&(dyn ToSql + Sync)],
) -> Pg<Vec<tokio_postgres::Row>> {
    let groups = reach_param(&source.reach);
    // $3 is the reach when confined; the conditions follow.
    let confined = if groups.is_some() { format!(" AND agent_id IN ({})", reach_agents(3)) } else { String::new() };
    let (where_sql, values) = conditions_sql(conditions, "", if groups.is_some() { 4 } else { 3 })?;
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&source.table, &source.agent_id];
    if let Some(groups) = &groups {
        params.push(groups);
    }
    params.extend(values.iter().map(|v| v as &(dyn ToSql + Sync)));
    let sql = format!(
        "{what} WHERE table_name = $1 AND ($2::text IS NULL OR agent_id = $2){confined}{where_sql}{}",
        extra(params.len() + 1)
    );
    params.extend_from_slice(extra_params);
    rows(c, &sql, &params).await
}

/// A page of rows, cut in SQL.
pub(super) async fn page(
    c: &impl GenericClient,
    source: &RowSource,
    conditions: &[ColumnCondition],
    offset: usize,
    limit: usize,
) -> Pg<RowPage> {
    let matched = count(c, source, conditions).await?;
    let (page_limit, page_offset) = (limit as i64, offset as i64);
    let extra = |n: usize| format!(" ORDER BY agent_id, id LIMIT ${n} OFFSET ${}", n + 1);
    let found = select(c, source, conditions, extra, &[&page_limit, &page_offset]).await?;
    let rows: Vec<(String, Map<String, Value>)> = found.into_iter().map(|(_, agent, row)| (agent, row)).collect();
    Ok(RowPage { more: matched > offset + rows.len(), rows, matched, counted_all: true, over_budget: false })
}

/// The next [`CHUNK_ROWS`] rows after `after`, for a filter that runs outside the store.
pub(super) async fn chunk(
    c: &impl GenericClient,
    source: &RowSource,
    conditions: &[ColumnCondition],
    after: Option<Cursor>,
) -> Pg<Chunk> {
    let chunk_rows = CHUNK_ROWS as i64;
    match after {
        None => {
            let extra = |n: usize| format!(" ORDER BY agent_id, id LIMIT ${n}");
            select(c, source, conditions, extra, &[&chunk_rows]).await
        }
        Some((agent, key)) => {
            let extra =
                |n: usize| format!(" AND (agent_id, id) > (${n}, ${}) ORDER BY agent_id, id LIMIT ${}", n + 1, n + 2);
            select(c, source, conditions, extra, &[&agent, &key, &chunk_rows]).await
        }
    }
}

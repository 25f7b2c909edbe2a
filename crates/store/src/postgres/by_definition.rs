//! Every step that ran one definition, across executions: its responses paged by a keyset,
//! and the rows a grouping reads (crate::by_definition).

use serde_json::Value;
use tokio_postgres::types::ToSql;

use super::json_rows::conditions_sql;
use super::{Pg, PostgresStore, rows};
use crate::by_definition::{DefinitionPage, DefinitionQuery, DefinitionRow, ResponsePlace, start_after, steps_pattern};

/// The condition on `response` that chooses one step of an execution ($1 its id, $2 the
/// step), and the one that chooses every step that ran a definition ($1 the steps pattern,
/// $2 the definition).
pub(super) const ROWS_OF_SQL: [&str; 2] = [
    "execution_id = $1 AND step = $2",
    "(execution_id, step) IN (SELECT e.execution_id, (j.n - 1) FROM execution e \
     CROSS JOIN LATERAL jsonb_array_elements(e.steps::jsonb) WITH ORDINALITY AS j(value, n) \
     WHERE e.steps LIKE $1 AND j.value ->> 'definition' = $2)",
];

pub(super) async fn page(store: &PostgresStore, q: DefinitionQuery) -> Pg<DefinitionPage> {
    let c = store.conn().await?;
    let after = start_after(&q.after);
    let groups = super::confinement::reader_groups(q.reader.as_ref());
    let (confined, extra) = super::confinement::readable("r.execution_id", q.reader.as_ref(), &groups, 9);
    let (where_sql, values) = conditions_sql(&q.conditions, "r.", 9 + extra.len())?;
    let (pattern, step) = (steps_pattern(&q.definition), after.step as i64);
    let status = q.status.map(|s| s.as_str());
    let limit = q.limit as i64 + 1;
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![
        &pattern,
        &q.definition,
        &after.started_at_ms,
        &after.execution_id,
        &step,
        &after.arrival,
        &q.agent_id,
        &status,
    ];
    params.extend(extra);
    params.extend(values.iter().map(|v| v as &(dyn ToSql + Sync)));
    let from_where = format!(
        "FROM response r
         JOIN execution e ON e.execution_id = r.execution_id
         JOIN execution_target t ON t.execution_id = r.execution_id AND t.agent_id = r.agent_id
         WHERE {rows_of}
         AND (e.created_at_ms, r.execution_id, r.step, r.arrival) > ($3, $4, $5, $6)
         AND ($7::text IS NULL OR r.agent_id = $7) AND ($8::text IS NULL OR t.status = $8){confined}{where_sql}",
        rows_of = ROWS_OF_SQL[1].replace("(execution_id, step)", "(r.execution_id, r.step)"),
    );
    let matched = super::count(&*c, &format!("SELECT COUNT(*) {from_where}"), &params).await?;
    let sql = format!(
        "SELECT r.agent_id, r.row, r.arrival, r.execution_id, r.step::bigint, e.created_at_ms {from_where}
         ORDER BY e.created_at_ms, r.execution_id, r.step, r.arrival LIMIT ${}",
        params.len() + 1,
    );
    params.push(&limit);
    let mut found = Vec::new();
    for r in rows(&*c, &sql, &params).await? {
        if let Value::Object(values) = r.try_get::<_, Value>(1)? {
            let place = ResponsePlace {
                arrival: r.try_get(2)?,
                execution_id: r.try_get(3)?,
                step: r.try_get::<_, i64>(4)? as usize,
                started_at_ms: r.try_get(5)?,
            };
            found.push(DefinitionRow { place, agent_id: r.try_get(0)?, values });
        }
    }
    let more = found.len() > q.limit;
    found.truncate(q.limit);
    Ok(DefinitionPage { rows: found, more, matched })
}

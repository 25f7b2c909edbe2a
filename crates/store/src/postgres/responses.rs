//! An agent's result stored once, and responses read back: pages with the conditions in SQL,
//! and groups of one column.

use serde_json::Value;
use tokio_postgres::types::ToSql;
use toolgate_domain::fleet::instruction::target_status;
use toolgate_domain::fleet::wire::RunResult;

use super::json_rows::{conditions_sql, json_key};
use super::{Pg, PostgresStore, execute, relaxed, row, rows};
use crate::RowsOf;
use crate::changes::Change;
use crate::fleet_work::{Group, GroupOrder, ResponsePage, ResponseQuery, ResponseRow, Taken, number};
use crate::rules::result_refusal;

pub(super) async fn store_result(store: &PostgresStore, agent_id: &str, result: &RunResult, now_ms: i64) -> Pg<Taken> {
    let mut c = store.conn().await?;
    let c = &mut c;
    let tx = relaxed(c).await?;
    // The rows' arrival numbers, under the execution row's lock until this commits (taken
    // before the target's, as a cancellation takes them): a later result waits, so its
    // numbers are larger and commit later, and a page never skips one.
    let rows_sent: i64 = result.steps.iter().map(|s| s.rows.len() as i64).sum();
    let received = row(
        &tx,
        "UPDATE execution SET responses_received = responses_received + $2 WHERE execution_id = $1 RETURNING responses_received",
        &[&result.execution_id, &rows_sent],
    )
    .await?;
    let Some(received) = received else { return Ok(Taken::Unknown) };
    let mut arrival: i64 = received.try_get::<_, i64>(0)? - rows_sent;
    let known = row(
        &tx,
        "SELECT status FROM execution_target WHERE execution_id = $1 AND agent_id = $2 FOR UPDATE",
        &[&result.execution_id, &agent_id],
    )
    .await?;
    let Some(known) = known else { return Ok(Taken::Unknown) };
    let status: String = known.try_get(0)?;
    let stored: i64 = row(
        &tx,
        "SELECT count(*) FROM execution_step WHERE execution_id = $1 AND agent_id = $2",
        &[&result.execution_id, &agent_id],
    )
    .await?
    .map(|r| r.try_get(0))
    .transpose()?
    .unwrap_or(0);
    if let Some(refusal) = result_refusal(&status, stored) {
        return Ok(refusal);
    }
    for (i, step) in result.steps.iter().enumerate() {
        let (index, count) = (i as i64, step.rows.len() as i64);
        execute(
            &tx,
            "INSERT INTO execution_step (execution_id, agent_id, step, status, error, row_count) VALUES ($1, $2, $3, $4, $5, $6)",
            &[&result.execution_id, &agent_id, &index, &step.status.as_str(), &step.error, &count],
        )
        .await?;
        let found: Vec<Value> = step.rows.iter().cloned().map(Value::Object).collect();
        execute(
            &tx,
            "INSERT INTO response (execution_id, step, agent_id, row_index, row, arrival)
             SELECT $1, $2, $3, n - 1, r, $5 + n FROM unnest($4::jsonb[]) WITH ORDINALITY AS u(r, n)",
            &[&result.execution_id, &index, &agent_id, &found, &arrival],
        )
        .await?;
        arrival += count;
    }
    let statuses: Vec<_> = result.steps.iter().map(|s| s.status).collect();
    let error = result.steps.iter().find_map(|s| s.error.clone());
    execute(
        &tx,
        "UPDATE execution_target SET status = $3, error = $4, updated_at_ms = $5 WHERE execution_id = $1 AND agent_id = $2",
        &[&result.execution_id, &agent_id, &target_status(&statuses).as_str(), &error, &now_ms],
    )
    .await?;
    store.notify(&tx, Change::ExecutionUpdated(result.execution_id.clone())).await?;
    tx.commit().await?;
    Ok(Taken::Stored)
}

pub(super) async fn page(store: &PostgresStore, q: ResponseQuery) -> Pg<ResponsePage> {
    let c = store.conn().await?;
    let groups = super::confinement::reader_groups(q.reader.as_ref());
    let (confined, extra) = super::confinement::readable("r.execution_id", q.reader.as_ref(), &groups, 6);
    let (where_sql, values) = conditions_sql(&q.conditions, "r.", 6 + extra.len())?;
    let step = q.step as i64;
    let status = q.status.map(|s| s.as_str());
    let limit = q.limit as i64 + 1;
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&q.execution_id, &step, &q.agent_id, &status, &q.after];
    params.extend(extra);
    params.extend(values.iter().map(|v| v as &(dyn ToSql + Sync)));
    let from_where = format!(
        "FROM response r JOIN execution_target t ON t.execution_id = r.execution_id AND t.agent_id = r.agent_id
         WHERE r.execution_id = $1 AND r.step = $2 AND r.arrival > $5 AND ($3::text IS NULL OR r.agent_id = $3) AND ($4::text IS NULL OR t.status = $4){confined}{where_sql}"
    );
    let matched = super::count(&*c, &format!("SELECT COUNT(*) {from_where}"), &params).await?;
    let sql =
        format!("SELECT r.agent_id, r.row, r.arrival {from_where} ORDER BY r.arrival LIMIT ${}", params.len() + 1);
    params.push(&limit);
    let mut found = Vec::new();
    for r in rows(&*c, &sql, &params).await? {
        if let Value::Object(values) = r.try_get::<_, Value>(1)? {
            found.push(ResponseRow { agent_id: r.try_get(0)?, values, arrival: r.try_get(2)? });
        }
    }
    let more = found.len() > q.limit;
    found.truncate(q.limit);
    Ok(ResponsePage { rows: found, more, matched })
}

/// What [`aggregate`] groups: one step of an execution, or every step that ran a definition,
/// as `reader` may read them.
pub(super) struct Grouping<'a> {
    pub rows: RowsOf<'a>,
    pub reader: Option<&'a crate::fleet_work::Reader>,
    pub group_by: &'a str,
    pub of: Option<&'a str>,
    pub order: GroupOrder,
    pub limit: usize,
}

pub(super) async fn aggregate(store: &PostgresStore, g: Grouping<'_>) -> Pg<Vec<Group>> {
    let Grouping { rows: chosen, reader, group_by, of, order, limit } = g;
    let group = json_key(group_by)?;
    // jsonb has an order but no min() or max(): the first of the sorted values instead.
    let measure = match of {
        Some(column) => format!("row -> '{}'", json_key(column)?),
        None => "NULL::jsonb".into(),
    };
    let groups = super::confinement::reader_groups(reader);
    let (confined, extra) = super::confinement::readable("response.execution_id", reader, &groups, 4);
    let sql = format!(
        "SELECT row -> '{group}' AS g, count(*),
           (array_agg({measure} ORDER BY {measure}) FILTER (WHERE {measure} IS NOT NULL AND {measure} <> 'null'::jsonb))[1],
           (array_agg({measure} ORDER BY {measure} DESC) FILTER (WHERE {measure} IS NOT NULL AND {measure} <> 'null'::jsonb))[1],
           sum({numeric}), avg({numeric})
         FROM response WHERE {source}{confined} GROUP BY g ORDER BY {} LIMIT $3",
        order.order_by(),
        numeric = format!("CASE WHEN jsonb_typeof({measure}) = 'number' THEN ({measure} #>> '{{}}')::float8 END"),
        source = super::by_definition::ROWS_OF_SQL[matches!(chosen, RowsOf::Definition(_)) as usize]
    );
    let c = store.conn().await?;
    let limit = limit as i64;
    // The two values that choose the rows, bound by reference (declared here, set per case).
    let (step_number, pattern): (i64, String);
    let source: [&(dyn ToSql + Sync); 2] = match &chosen {
        RowsOf::Step { execution_id, step } => {
            step_number = *step as i64;
            [execution_id, &step_number]
        }
        RowsOf::Definition(definition) => {
            pattern = crate::by_definition::steps_pattern(definition);
            [&pattern, definition]
        }
    };
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![source[0], source[1], &limit];
    params.extend(extra);
    rows(&*c, &sql, &params)
        .await?
        .iter()
        .map(|r| {
            let value = |i| r.try_get::<_, Option<Value>>(i).map(Option::unwrap_or_default);
            let (sum, avg) = (number(r.try_get(4)?), number(r.try_get(5)?));
            Ok(Group { value: value(0)?, count: r.try_get(1)?, min: value(2)?, max: value(3)?, sum, avg })
        })
        .collect()
}

//! Every step that ran one definition, across executions: its responses paged by a keyset,
//! and the rows a grouping reads (crate::by_definition).

use rusqlite::Connection;

use super::responses::Narrowing;
use crate::by_definition::{
    DefinitionPage, DefinitionQuery, DefinitionRow, ResponsePlace, RowsOf, start_after, steps_pattern,
};

/// The (execution id, step) pairs that ran the definition bound twice after it.
const STEPS_THAT_RAN: &str = "SELECT e.execution_id, CAST(j.key AS INTEGER) FROM execution e, json_each(e.steps) j \
     WHERE e.steps LIKE ? AND json_extract(j.value, '$.definition') = ?";

/// The condition on `response` that chooses `rows`, and its values.
pub(super) fn rows_of(rows: RowsOf<'_>) -> (String, Vec<rusqlite::types::Value>) {
    match rows {
        RowsOf::Step { execution_id, step } => {
            ("execution_id = ? AND step = ?".into(), vec![execution_id.to_string().into(), (step as i64).into()])
        }
        RowsOf::Definition(definition) => (
            format!("(execution_id, step) IN ({STEPS_THAT_RAN})"),
            vec![steps_pattern(definition).into(), definition.to_string().into()],
        ),
    }
}

pub(super) fn page(c: &Connection, q: &DefinitionQuery) -> rusqlite::Result<DefinitionPage> {
    let after = start_after(&q.after);
    let from_where = format!(
        "FROM response r \
         JOIN execution e ON e.execution_id = r.execution_id \
         JOIN execution_target t ON t.execution_id = r.execution_id AND t.agent_id = r.agent_id \
         WHERE (r.execution_id, r.step) IN ({STEPS_THAT_RAN}) \
         AND (e.created_at_ms, r.execution_id, r.step, r.arrival) > (?, ?, ?, ?)"
    );
    let mut sql = format!("SELECT r.agent_id, r.row, r.arrival, r.execution_id, r.step, e.created_at_ms {from_where}");
    let mut values: Vec<rusqlite::types::Value> = vec![
        steps_pattern(&q.definition).into(),
        q.definition.clone().into(),
        after.started_at_ms.into(),
        after.execution_id.into(),
        (after.step as i64).into(),
        after.arrival.into(),
    ];
    let narrowing = Narrowing {
        agent_id: q.agent_id.as_deref(),
        status: q.status,
        reader: q.reader.as_ref(),
        conditions: &q.conditions,
    };
    let matched = narrowing.count(c, &from_where, values.clone())?;
    narrowing.finish(&mut sql, &mut values, "e.created_at_ms, r.execution_id, r.step, r.arrival", q.limit)?;
    let mut stmt = c.prepare_cached(&sql)?;
    let found = stmt.query_map(rusqlite::params_from_iter(values), |r| {
        let place = ResponsePlace {
            arrival: r.get(2)?,
            execution_id: r.get(3)?,
            step: r.get::<_, i64>(4)? as usize,
            started_at_ms: r.get(5)?,
        };
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, place))
    })?;
    let mut rows = Vec::new();
    for item in found {
        let (agent_id, text, place) = item?;
        // A row that is not a JSON object was never stored so; it is skipped, as per step.
        if let Ok(values) = serde_json::from_str(&text) {
            rows.push(DefinitionRow { place, agent_id, values });
        }
    }
    let more = rows.len() > q.limit;
    rows.truncate(q.limit);
    Ok(DefinitionPage { rows, more, matched })
}

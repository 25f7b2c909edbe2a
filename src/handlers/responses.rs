//! The rows agents returned: read with filters, or grouped. Columns are the definition's
//! declared ones; a wrong one is an error naming the closest.

use serde_json::{Map, Value, json};
use toolgate_domain::groups::Visible;
use toolgate_domain::fleet::compare::ValueKind;
use toolgate_domain::fleet::instruction::{Definition, ResultColumn, TargetStatus};
use toolgate_domain::{ToolError, ToolOutput, ToolResult};
use toolgate_policy::did_you_mean;
use toolgate_store::{ColumnCondition, ColumnValue, DefinitionQuery, GroupOrder, ResponseQuery, RowsOf};

#[path = "responses/every_run.rs"]
mod every_run;
use super::executions::{header, reader};
use super::confined::one_agent;
use super::fleet::paging;
use super::pages::{EVERY_ROW, Pager, fit};
use crate::instructions::{definition, instructions};
use crate::args;
use crate::services::ToolContext;

/// The definition of one step of an execution, and its columns.
/// The step asked for (0 when none), its definition and columns, and whether the execution
/// is finished (every target final).
async fn step_definition(
    ctx: &ToolContext,
    execution_id: &str,
    step: Option<i64>,
) -> Result<(usize, &'static Definition, Vec<&'static ResultColumn>, bool), ToolError> {
    let header = header(ctx, execution_id).await?;
    let finished = header.counts.iter().all(|(status, n)| status.is_final() || *n == 0);
    let step = step.unwrap_or(0).max(0) as usize;
    let Some(run) = header.steps.get(step) else {
        return Err(ToolError::InvalidArguments(format!(
            "execution `{execution_id}` has {} step(s), numbered from 0: there is no step {step}",
            header.steps.len()
        )));
    };
    let definition = definition(&run.definition)?;
    Ok((step, definition, instructions().columns(definition), finished))
}

/// Which rows a call reads: one step of one execution, or every step that ran a definition
/// (the reference's `instruction_id`).
enum Reading {
    Step { execution_id: String, step: usize, definition: &'static Definition, finished: bool },
    EveryRun { definition: &'static Definition },
}

impl Reading {
    fn definition(&self) -> &'static Definition {
        match self {
            Reading::Step { definition, .. } | Reading::EveryRun { definition } => definition,
        }
    }

    fn rows_of(&self) -> RowsOf<'_> {
        match self {
            Reading::Step { execution_id, step, .. } => RowsOf::Step { execution_id, step: *step },
            Reading::EveryRun { definition } => RowsOf::Definition(&definition.name),
        }
    }
}

async fn reading(
    ctx: &ToolContext,
    execution_id: Option<&str>,
    wanted: Option<&str>,
    step: Option<i64>,
) -> Result<Reading, ToolError> {
    match (execution_id, wanted) {
        (Some(execution_id), wanted) => {
            let (step, definition, _, finished) = step_definition(ctx, execution_id, step).await?;
            if let Some(wanted) = wanted.filter(|w| *w != definition.name) {
                return Err(ToolError::InvalidArguments(format!(
                    "execution `{execution_id}` step {step} ran `{}`, not `{wanted}`: give execution_id for its rows, \
                     or definition alone for every run of `{wanted}`",
                    definition.name
                )));
            }
            Ok(Reading::Step { execution_id: execution_id.to_string(), step, definition, finished })
        }
        (None, Some(name)) => {
            if step.is_some() {
                return Err(ToolError::InvalidArguments(
                    "`step` picks a step of execution_id's bundle; with `definition` alone every step that ran it is read"
                        .into(),
                ));
            }
            Ok(Reading::EveryRun { definition: definition(name)? })
        }
        (None, None) => Err(ToolError::InvalidArguments(
            "give `execution_id` (one execution's rows; list_executions lists them) or `definition` (every run of \
             it across executions; the reference calls it `instruction_id`)"
                .into(),
        )),
    }
}

fn column<'a>(columns: &[&'a ResultColumn], definition: &Definition, name: &str) -> Result<&'a ResultColumn, ToolError> {
    columns.iter().copied().find(|c| c.name == name).ok_or_else(|| {
        let names = columns.iter().map(|c| c.name.as_str());
        ToolError::InvalidArguments(format!(
            "definition `{}` has no column `{name}`: {}",
            definition.name,
            did_you_mean(name, names)
        ))
    })
}

fn conditions(
    filters: Option<Map<String, Value>>,
    columns: &[&ResultColumn],
    definition: &Definition,
) -> Result<Vec<ColumnCondition>, ToolError> {
    filters
        .unwrap_or_default()
        .into_iter()
        .map(|(name, value)| {
            let c = column(columns, definition, &name)?;
            let value = match (c.kind, &value) {
                (ValueKind::Integer, Value::Number(n)) if n.is_i64() => ColumnValue::Integer(n.as_i64().unwrap_or(0)),
                (ValueKind::Integer, _) => {
                    return Err(ToolError::InvalidArguments(format!("column `{name}` holds integers: give an integer, not {value}")));
                }
                (_, Value::String(s)) => ColumnValue::Text(s.clone()),
                _ => return Err(ToolError::InvalidArguments(format!("column `{name}` holds text: give a string, not {value}"))),
            };
            Ok(ColumnCondition { column: name, equal: true, value })
        })
        .collect()
}

pub async fn query_responses(ctx: &ToolContext, args: args::QueryResponses) -> ToolResult {
    let read = reading(ctx, args.execution_id.as_deref(), args.definition.as_deref(), args.step).await?;
    if let Some(agent_id) = &args.agent_id {
        one_agent(ctx, agent_id).await?;
    }
    let definition = read.definition();
    let columns = instructions().columns(definition);
    let status = args.status.as_deref().map(TargetStatus::parse).transpose().map_err(ToolError::InvalidArguments)?;
    let conditions = conditions(args.where_, &columns, definition)?;
    let (_, limit) = paging(None, args.limit);
    let Reading::Step { execution_id, step, finished, .. } = read else {
        let query = DefinitionQuery {
            definition: definition.name.clone(),
            reader: Some(reader(ctx)),
            agent_id: args.agent_id,
            status,
            conditions,
            after: args.cursor.as_deref().map(|c| every_run::parse(c, &definition.name)).transpose()?,
            limit,
        };
        return every_run::page(ctx, query, &columns).await;
    };
    let after = match &args.cursor {
        Some(cursor) => Cursor::parse(cursor, &execution_id, step)?,
        None => 0,
    };
    let query = ResponseQuery {
        execution_id: execution_id.clone(),
        reader: Some(reader(ctx)),
        step,
        agent_id: args.agent_id.clone(),
        status,
        conditions,
        after,
        limit,
    };
    let page = ctx.services().work().responses(query).await?;
    let fleet = ctx.services().fleet();
    let arrivals: Vec<i64> = page.rows.iter().map(|r| r.arrival).collect();
    let rows: Vec<Value> = page
        .rows
        .into_iter()
        .map(|r| json!({"agent_id": r.agent_id, "hostname": fleet.hostname(&Visible::All, &r.agent_id), "values": r.values}))
        .collect();
    let mut answer = json!({
        "execution_id": execution_id,
        "definition": definition.name,
        "columns": columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        "next_cursor": Cursor::format(&execution_id, step, i64::MAX),
        "result_truncated_by_cap": true,
        "remaining": page.matched,
        // More responses may arrive while agents are still answering: poll no sooner.
        "retry_after_ms": super::executions::poll_verdict("query_responses", finished),
    });
    let rows = fit(ctx, &answer, rows);
    let cut = rows.len() < arrivals.len();
    let last = rows.len().checked_sub(1).map_or(after, |i| arrivals[i]);
    // Where the next page starts: after this one while rows may follow (the limit or the
    // budget cut it, or agents are still answering); none once finished and all was read.
    let more = page.more || cut;
    answer["next_cursor"] = json!((more || !finished).then(|| Cursor::format(&execution_id, step, last)));
    answer["result_truncated_by_cap"] = json!(more);
    answer["remaining"] = json!(page.matched.saturating_sub(rows.len()));
    answer["rows"] = Value::Array(rows);
    Ok(ToolOutput::Structured(answer))
}

/// A place in an execution step's arrival order, as `query_responses` hands it out: opaque to
/// clients, bound to the execution and step it was made for.
struct Cursor;

impl Cursor {
    fn format(execution_id: &str, step: usize, arrival: i64) -> String {
        format!("{execution_id}/{step}/{arrival}")
    }

    /// The arrival number after which the page starts.
    fn parse(cursor: &str, execution_id: &str, step: usize) -> Result<i64, ToolError> {
        let mut parts = cursor.rsplitn(3, '/');
        let (arrival, at_step, of) = (parts.next(), parts.next(), parts.next());
        let arrival = arrival.and_then(|a| a.parse::<i64>().ok()).filter(|a| *a >= 0);
        match (of, at_step.and_then(|s| s.parse::<usize>().ok()), arrival) {
            (Some(of), Some(at_step), Some(arrival)) if of == execution_id && at_step == step => Ok(arrival),
            (Some(of), Some(at_step), Some(_)) => Err(ToolError::InvalidArguments(format!(
                "this cursor pages execution `{of}` step {at_step}, not `{execution_id}` step {step}: pass the next_cursor of the same query, or none to start over"
            ))),
            _ => Err(ToolError::InvalidArguments(format!(
                "`{}` is not a cursor query_responses gave: pass a next_cursor as it came, or none to start from the first row",
                cursor.chars().take(80).collect::<String>()
            ))),
        }
    }
}

pub async fn aggregate_responses(ctx: &ToolContext, args: args::AggregateResponses) -> ToolResult {
    let read = reading(ctx, args.execution_id.as_deref(), args.definition.as_deref(), args.step).await?;
    let definition = read.definition();
    let columns = instructions().columns(definition);
    column(&columns, definition, &args.group_by)?;
    if let Some(of) = &args.of {
        let c = column(&columns, definition, of)?;
        if c.kind != ValueKind::Integer {
            return Err(ToolError::InvalidArguments(format!(
                "`of` takes an integer column (its min and max are numbers); `{of}` holds {}",
                c.kind.as_str()
            )));
        }
    }
    let name = args.aggregate.as_deref().unwrap_or("count");
    let order = GroupOrder::parse(name).unwrap_or_default();
    if order != GroupOrder::Count && args.of.is_none() {
        return Err(ToolError::InvalidArguments(format!(
            "`aggregate: {name}` orders by the {name} of a column: name it as `of` (an integer column of `{}`)",
            definition.name
        )));
    }
    let pager = Pager::of(&args, 100)?;
    let work = &ctx.services().repositories().work;
    let (of, reader) = (args.of.as_deref(), reader(ctx));
    // Every group (SQL groups every row before it can order them): paged here.
    let groups = work.aggregate(read.rows_of(), Some(&reader), &args.group_by, of, order, EVERY_ROW).await?;
    let (groups, count) = pager.window(groups);
    let groups: Vec<Value> = groups
        .into_iter()
        .map(|g| json!({"value": g.value, "count": g.count, "min": g.min, "max": g.max, "sum": g.sum, "avg": g.avg}))
        .collect();
    let execution_id = match &read {
        Reading::Step { execution_id, .. } => Some(execution_id.as_str()),
        Reading::EveryRun { .. } => None,
    };
    let envelope = json!({
        "execution_id": execution_id,
        "definition": definition.name,
        "group_by": args.group_by,
        "of": args.of,
        "aggregate": name,
    });
    pager.answer(ctx, envelope, "groups", groups, count)
}

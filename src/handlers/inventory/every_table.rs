//! Inventory without a table (the reference's whole inventory of an agent, or of the fleet):
//! the rows of every table in the order the tables are declared, each naming its table, one
//! page at a time. A page walks on from one table into the next; each table counts its rows,
//! so the answer says how many remain in all.

use std::collections::HashSet;

use serde_json::{Map, Value, json};
use toolgate_domain::ToolResult;
use toolgate_domain::ToolError;
use toolgate_domain::fleet::inventory::TABLES;

use super::super::pages::Pager;
use super::{Matched, fleet_rows};
use crate::args;
use crate::services::ToolContext;

/// A row of some table: its table, agent, the agent's host name, its columns.
type TableRow = (&'static str, String, Option<String>, Map<String, Value>);

/// The page's rows of every table, and how many rows every table holds together.
async fn rows_of_every_table(
    ctx: &ToolContext,
    agents: Option<HashSet<String>>,
    one_agent: Option<&str>,
    pager: &Pager,
) -> Result<(Vec<TableRow>, Matched), ToolError> {
    let (mut page, mut before) = (Vec::new(), Matched { rows: 0, exact: true });
    for table in TABLES {
        // A table the page does not reach is only counted (a limit of none).
        let (skip, wanted) = (pager.start().saturating_sub(before.rows), pager.limit() - page.len());
        let (rows, matched) = fleet_rows(ctx, table, Vec::new(), agents.clone(), one_agent, (skip, wanted)).await?;
        page.extend(rows.into_iter().map(|(agent, host, row)| (table.name, agent, host, row)));
        before = Matched { rows: before.rows + matched.rows, exact: before.exact && matched.exact };
    }
    Ok((page, before))
}

fn with_table(table: &str, row: Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("table".into(), json!(table));
    out.extend(row);
    out
}

/// `get_agent_inventory` without `table`: every table the agent reported, each one's state,
/// and a page of their rows.
pub(super) async fn of_one_agent(ctx: &ToolContext, args: &args::GetAgentInventory) -> ToolResult {
    let pager = Pager::of(args, super::DEFAULT_LIMIT as usize)?;
    let statuses = ctx.services().fleet().store().inventory_status(&args.agent_id).await?;
    let tables: Vec<Value> = statuses
        .iter()
        .map(|s| {
            json!({"table": s.table, "available": s.available, "reason": s.reason,
                   "collected_at_ms": s.collected_at_ms, "rows": s.rows})
        })
        .collect();
    let (rows, total) = rows_of_every_table(ctx, None, Some(&args.agent_id), &pager).await?;
    let rows = rows.into_iter().map(|(table, _, _, row)| Value::Object(with_table(table, row))).collect();
    let envelope = json!({"agent_id": args.agent_id, "table": null, "available": null, "reason": null,
                          "collected_at_ms": null, "tables": tables, "remaining_exact": total.exact});
    pager.answer(ctx, envelope, "rows", rows, total.rows)
}

/// `query_inventory` without `table`: a page of every table's rows across the fleet (or the
/// scope's agents, or one agent's), each with its table, agent id and host name.
pub(super) async fn across_the_fleet(
    ctx: &ToolContext,
    agents: Option<HashSet<String>>,
    one_agent: Option<&str>,
    pager: Pager,
) -> ToolResult {
    let (rows, total) = rows_of_every_table(ctx, agents, one_agent, &pager).await?;
    let rows = rows
        .into_iter()
        .map(|(table, agent, host, row)| {
            let mut out = Map::new();
            out.insert("agent_id".into(), json!(agent));
            out.insert("hostname".into(), json!(host));
            out.extend(with_table(table, row));
            Value::Object(out)
        })
        .collect();
    pager.answer(ctx, json!({"table": null, "remaining_exact": total.exact}), "rows", rows, total.rows)
}

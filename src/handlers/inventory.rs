//! Inventory: the declared tables, one agent's copy of a table, and queries across the fleet.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};
use toolgate_domain::fleet::inventory::{self, TABLES, Table};
use toolgate_domain::groups::Visible;
use toolgate_domain::{ToolError, ToolOutput, ToolResult};
use toolgate_fleet::query::{self, Condition, Filter};
use toolgate_store::{RowFilter, RowPage, RowSource};

use super::confined::one_agent;
use super::fleet::{DEFAULT_LIMIT, hostname};
use super::pages::Pager;
use super::scopes::chosen_agents;
use crate::args;

#[path = "inventory/every_table.rs"]
mod every_table;
use crate::services::ToolContext;

fn table(name: &str) -> Result<&'static Table, ToolError> {
    inventory::table(name).map_err(ToolError::InvalidArguments)
}

fn checked<'a>(
    table: &Table,
    filters: impl Iterator<Item = Filter<'a>>,
    columns: &[String],
) -> Result<(Vec<Condition>, Vec<&'static str>), ToolError> {
    let filters: Vec<Filter<'a>> = filters.collect();
    let conditions = query::conditions(table, &filters).map_err(ToolError::InvalidArguments)?;
    let columns = query::columns(table, columns).map_err(ToolError::InvalidArguments)?;
    Ok((conditions, columns))
}

pub async fn list_inventory_tables(ctx: &ToolContext, _args: args::ListInventoryTables) -> ToolResult {
    // Counts of the agents the caller may see only.
    let coverage = ctx.services().fleet().store().inventory_coverage(ctx.reach()).await?;
    let tables: Vec<Value> = TABLES
        .iter()
        .map(|t| {
            let (reported, unavailable) =
                coverage.iter().find(|(table, ..)| table == t.name).map_or((0, 0), |(_, r, u)| (*r, *u));
            json!({"name": t.name, "description": t.description, "source": t.source, "columns": t.columns,
                   "agents_reported": reported, "agents_unavailable": unavailable})
        })
        .collect();
    Ok(ToolOutput::Structured(json!({ "tables": tables })))
}

pub async fn get_agent_inventory(ctx: &ToolContext, args: args::GetAgentInventory) -> ToolResult {
    one_agent(ctx, &args.agent_id).await?;
    let Some(table) = args.table.as_deref() else {
        no_columns_without_a_table(&args.filters, &args.columns)?;
        return every_table::of_one_agent(ctx, &args).await;
    };
    let table = self::table(table)?;
    let filters = args.filters.iter().flatten().map(|f| Filter { column: &f.column, op: &f.op, value: &f.value });
    let (conditions, columns) = checked(table, filters, args.columns.as_deref().unwrap_or_default())?;
    let store = ctx.services().fleet().store();
    let status = store.inventory_status(&args.agent_id).await?.into_iter().find(|s| s.table == table.name);
    let Some(status) = status else {
        return Err(ToolError::NotFound(format!(
            "agent {} has not reported `{}` yet: agents report every table when they connect (get_agent_details shows its status)",
            args.agent_id, table.name
        )));
    };
    let pager = Pager::of(&args, DEFAULT_LIMIT as usize)?;
    let (in_store, rest) = query::split_for_store(conditions);
    let filter = (!rest.is_empty()).then(|| RowFilter::new(move |_: &str, row| query::matches(&rest, row)));
    let source = RowSource { table: table.name.into(), agent_id: Some(args.agent_id.clone()), reach: ctx.reach().clone() };
    let page = within_budget(store.inventory_rows(&source, &in_store, filter, pager.start(), pager.limit()).await?)?;
    let rows = page.rows.into_iter().map(|(_, row)| Value::Object(query::project(row, &columns))).collect();
    let envelope = json!({"agent_id": args.agent_id, "table": table.name, "available": status.available,
                          "reason": status.reason, "collected_at_ms": status.collected_at_ms,
                          "remaining_exact": page.counted_all});
    pager.answer(ctx, envelope, "rows", rows, page.matched)
}

/// A page whose filters ran out of time is refused, with what to do about it, rather than
/// answered short.
fn within_budget(page: RowPage) -> Result<RowPage, ToolError> {
    if page.over_budget {
        return Err(ToolError::InvalidArguments(format!(
            "the filters that are matched row by row (globs with ~, orderings, versions, a scope) took more than {} s \
             over this table: add = conditions on indexed columns (name, port) or a narrower scope, or page with a smaller limit",
            toolgate_store::FILTER_BUDGET.as_secs()
        )));
    }
    Ok(page)
}

/// Filters and columns name one table's columns: without a table they mean nothing.
fn no_columns_without_a_table<F, C>(filters: &Option<F>, columns: &Option<C>) -> Result<(), ToolError> {
    if filters.is_some() || columns.is_some() {
        return Err(ToolError::InvalidArguments(
            "`filters` and `columns` name a table's columns: give `table` with them (list_inventory_tables lists the tables and their columns)".into(),
        ));
    }
    Ok(())
}

/// How many rows match: every one, or (`exact` false) a lower bound, when a filter matched
/// row by row stopped counting a while past the page.
#[derive(Clone, Copy)]
struct Matched {
    rows: usize,
    exact: bool,
}

/// Rows of `table` across the fleet (or `agents`), each with its agent id and host name, the
/// `limit` from `offset` of those that match, and how many match.
async fn fleet_rows(
    ctx: &ToolContext,
    table: &'static Table,
    conditions: Vec<Condition>,
    agents: Option<HashSet<String>>,
    one_agent: Option<&str>,
    (offset, limit): (usize, usize),
) -> Result<(Vec<(String, Option<String>, Map<String, Value>)>, Matched), ToolError> {
    let (in_store, rest) = query::split_for_store(conditions);
    let filter = (agents.is_some() || !rest.is_empty()).then(|| {
        RowFilter::new(move |agent: &str, row: &Map<String, Value>| {
            agents.as_ref().is_none_or(|a| a.contains(agent)) && query::matches(&rest, row)
        })
    });
    let fleet = ctx.services().fleet();
    // Confined in the store's query, before the page is cut.
    let source = RowSource { table: table.name.into(), agent_id: one_agent.map(str::to_string), reach: ctx.reach().clone() };
    let page = within_budget(fleet.store().inventory_rows(&source, &in_store, filter, offset, limit).await?)?;
    // Host names of the page's agents only (at most a page of lookups, not a walk of the fleet).
    let mut hostnames: HashMap<String, Option<String>> = HashMap::new();
    for (agent, _) in &page.rows {
        if !hostnames.contains_key(agent) {
            hostnames.insert(agent.clone(), fleet.with_agent(&Visible::All, agent, hostname).flatten());
        }
    }
    let matched = Matched { rows: page.matched, exact: page.counted_all };
    let rows = page
        .rows
        .into_iter()
        .map(|(agent, row)| {
            let host = hostnames.get(&agent).cloned().flatten();
            (agent, host, row)
        })
        .collect();
    Ok((rows, matched))
}

pub async fn query_inventory(ctx: &ToolContext, args: args::QueryInventory) -> ToolResult {
    if let Some(agent_id) = &args.agent_id {
        one_agent(ctx, agent_id).await?;
    }
    let agents = match &args.scope {
        Some(expression) => Some(chosen_agents(ctx, expression).await?),
        None => None,
    };
    let pager = Pager::of(&args, DEFAULT_LIMIT as usize)?;
    let Some(table) = args.table.as_deref() else {
        no_columns_without_a_table(&args.filters, &args.columns)?;
        return every_table::across_the_fleet(ctx, agents, args.agent_id.as_deref(), pager).await;
    };
    let table = self::table(table)?;
    let filters = args.filters.iter().flatten().map(|f| Filter { column: &f.column, op: &f.op, value: &f.value });
    let (conditions, columns) = checked(table, filters, args.columns.as_deref().unwrap_or_default())?;
    let paging = (pager.start(), pager.limit());
    let (rows, matched) = fleet_rows(ctx, table, conditions, agents, args.agent_id.as_deref(), paging).await?;
    let rows = rows
        .into_iter()
        .map(|(agent, host, row)| {
            let mut out = Map::new();
            out.insert("agent_id".into(), json!(agent));
            out.insert("hostname".into(), json!(host));
            out.extend(query::project(row, &columns));
            Value::Object(out)
        })
        .collect();
    let envelope = json!({"table": table.name, "remaining_exact": matched.exact});
    pager.answer(ctx, envelope, "rows", rows, matched.rows)
}

pub async fn query_installed_software(ctx: &ToolContext, args: args::QueryInstalledSoftware) -> ToolResult {
    if let Some(agent_id) = &args.agent_id {
        one_agent(ctx, agent_id).await?;
    }
    let table = table("installed_software")?;
    let mut wanted: Vec<(&str, &str, Value)> = Vec::new();
    if let Some(name) = &args.name {
        let op = if name.contains(['*', '?']) { "~" } else { "=" };
        wanted.push(("name", op, json!(name)));
    }
    if let Some(below) = &args.version_below {
        wanted.push(("version", "<", json!(below)));
    }
    if let Some(at_least) = &args.version_at_least {
        wanted.push(("version", ">=", json!(at_least)));
    }
    let filters = wanted.iter().map(|(column, op, value)| Filter { column, op, value });
    let (conditions, _) = checked(table, filters, &[])?;
    let pager = Pager::of(&args, DEFAULT_LIMIT as usize)?;
    let paging = (pager.start(), pager.limit());
    let (rows, matched) = fleet_rows(ctx, table, conditions, None, args.agent_id.as_deref(), paging).await?;
    let packages = rows
        .into_iter()
        .map(|(agent, host, row)| {
            json!({"agent_id": agent, "hostname": host, "name": row.get("name"), "version": row.get("version"),
                   "architecture": row.get("architecture"), "source": row.get("source")})
        })
        .collect();
    pager.answer(ctx, json!({"remaining_exact": matched.exact}), "packages", packages, matched.rows)
}

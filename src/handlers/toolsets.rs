//! `find_tools` and `enable_toolset` (docs/toolsets.md): the dynamic list's two tools. They
//! read the catalogue the build made and the caller's tier and roles; they decide nothing
//! (the gate decides every call, listed or not).

use std::sync::OnceLock;

use serde_json::{Value, json};
use toolgate_domain::catalogue::{Catalogue, ToolMeta};
use toolgate_domain::toolsets::Toolsets;
use toolgate_domain::{ToolError, ToolOutput, ToolResult};
use toolgate_policy::Decision;

use crate::args;
use crate::services::ToolContext;

#[path = "toolsets/ranking.rs"]
mod ranking;
#[path = "toolsets/thesaurus.rs"]
mod thesaurus;

fn index() -> &'static ranking::Index {
    static INDEX: OnceLock<ranking::Index> = OnceLock::new();
    INDEX.get_or_init(|| ranking::Index::of(&crate::registry::CATALOGUE))
}

/// The tools this caller's tier lets it see (what tools/list would hold with `all`).
fn visible<'a>(ctx: &'a ToolContext, catalogue: &'a Catalogue) -> impl Iterator<Item = &'a ToolMeta> + 'a {
    catalogue.tools.iter().filter(move |t| catalogue.decision(t, ctx.caller().tier) != Decision::Deny)
}

fn toolset_of(catalogue: &Catalogue, tool: &ToolMeta) -> &'static str {
    tool.toolset.and_then(|i| catalogue.toolsets.get(usize::from(i))).map_or("", |t| t.name)
}

/// What the caller may do with a tool now: its tier's decision, if its roles grant the pair.
fn may_call(ctx: &ToolContext, catalogue: &Catalogue, tool: &ToolMeta) -> &'static str {
    if catalogue.reach(ctx.principal(), tool.securable, tool.operation).is_none() {
        return "no";
    }
    match catalogue.decision(tool, ctx.caller().tier) {
        Decision::Allow => "now",
        Decision::ConfirmRequired => "after_confirmation",
        Decision::ApprovalRequired => "after_approval",
        Decision::Deny => "no",
    }
}

/// The description's first sentence.
fn summary(description: &str) -> &str {
    let end = description.find(". ").map_or(description.len(), |i| i + 1);
    &description[..end]
}

fn schema_of(tool: &ToolMeta) -> Value {
    serde_json::from_str(tool.input_schema).unwrap_or_default()
}

fn toolset_index(catalogue: &Catalogue, name: &str) -> Result<usize, ToolError> {
    catalogue.toolsets.iter().position(|t| t.name == name).ok_or_else(|| {
        let names: Vec<&str> = catalogue.toolsets.iter().map(|t| t.name).collect();
        let closest = match toolgate_policy::closest(name, names.iter().copied()).first() {
            Some(c) => format!(" (did you mean `{c}`?)"),
            None => String::new(),
        };
        ToolError::InvalidArguments(format!("unknown toolset `{name}`{closest}; the toolsets are: {}", names.join(", ")))
    })
}

pub async fn find_tools(ctx: &ToolContext, args: args::FindTools) -> ToolResult {
    let catalogue = ctx.services().catalogue();
    let shown = ctx.listing().shown();
    let only = args.toolset.as_deref().map(|name| toolset_index(catalogue, name)).transpose()?;
    let entry = |tool: &ToolMeta| {
        let required = schema_of(tool).get("required").cloned().unwrap_or_else(|| json!([]));
        json!({
            "name": tool.name,
            "summary": summary(tool.description),
            "toolset": toolset_of(catalogue, tool),
            "required": required,
            "read_only": tool.annotations.read_only,
            "may_call": may_call(ctx, catalogue, tool),
            "listed": shown.shows(tool.toolset),
        })
    };
    let in_scope = |tool: &&ToolMeta| only.is_none_or(|k| tool.toolset == Some(k as u8));
    let limit = args.limit.unwrap_or(8) as usize;
    let query = args.query.as_deref().map(str::trim).filter(|q| !q.is_empty());
    let matches: Vec<Value> = match query {
        Some(query) => {
            let scores = index().scores(query);
            let mut ranked: Vec<&ToolMeta> =
                visible(ctx, catalogue).filter(in_scope).filter(|t| scores[t.index] > 0.0).collect();
            ranked.sort_by(|a, b| scores[b.index].total_cmp(&scores[a.index]).then(a.index.cmp(&b.index)));
            ranked.into_iter().take(limit).map(entry).collect()
        }
        None if only.is_some() => visible(ctx, catalogue).filter(in_scope).map(entry).collect(),
        None => Vec::new(),
    };
    let mut schemas = Vec::new();
    for name in args.tools.iter().flatten() {
        let tool = visible(ctx, catalogue).find(|t| t.name == name.as_str()).ok_or_else(|| {
            let closest = toolgate_policy::closest(name, visible(ctx, catalogue).map(|t| t.name));
            let hint = closest.first().map_or(String::new(), |c| format!(" (did you mean `{c}`?)"));
            ToolError::InvalidArguments(format!("`tools`: no tool `{name}` this token may see{hint}"))
        })?;
        schemas.push(json!({"name": tool.name, "inputSchema": schema_of(tool)}));
    }
    let toolsets: Vec<Value> = match (query, &args.tools, only) {
        (None, None, None) => catalogue
            .toolsets
            .iter()
            .enumerate()
            .map(|(i, set)| {
                let count = visible(ctx, catalogue).filter(|t| t.toolset == Some(i as u8)).count();
                json!({"name": set.name, "description": set.description, "tools": count, "listed": shown.contains(i)})
            })
            .collect(),
        _ => Vec::new(),
    };
    Ok(ToolOutput::Structured(json!({"matches": matches, "schemas": schemas, "toolsets": toolsets})))
}

pub async fn enable_toolset(ctx: &ToolContext, args: args::EnableToolset) -> ToolResult {
    let catalogue = ctx.services().catalogue();
    let index = toolset_index(catalogue, &args.toolset)?;
    let tools: Vec<&str> =
        visible(ctx, catalogue).filter(|t| t.toolset == Some(index as u8)).map(|t| t.name).collect();
    let name = catalogue.toolsets[index].name;
    let (listed, how) = match ctx.listing().add(Toolsets::of(index)) {
        Some(now) => {
            let names = now.names(catalogue.toolsets).join(",");
            (true, format!("This session's tools/list now holds `{name}` (notifications/tools/list_changed was sent; the list is now: {names})."))
        }
        None => {
            let names = ctx.listing().shown().union(Toolsets::of(index)).names(catalogue.toolsets).join(",");
            let how = format!(
                "This request has no session (protocol 2026-07-28, or a client that keeps none), so each request chooses its own list: send the header `X-MCP-Toolsets: {names}` (or use the endpoint /mcp/x/{names}) and list again. These tools can be called by name already."
            );
            (false, how)
        }
    };
    Ok(ToolOutput::Structured(json!({"toolset": name, "tools": tools, "listed": listed, "how": how})))
}

//! Instruction definitions and the agent plugins behind them, as the build checked them.

use serde_json::{Value, json};
use toolgate_domain::fleet::instruction::Definition;
use toolgate_domain::{ToolOutput, ToolResult};

use crate::instructions::{definition, instructions};
use super::pages::Pager;
use crate::args;
use crate::services::ToolContext;

pub(crate) fn definition_json(d: &Definition) -> Value {
    let columns: Vec<Value> = instructions()
        .columns(d)
        .into_iter()
        .map(|c| json!({"name": c.name, "type": c.kind.as_str(), "description": c.description}))
        .collect();
    json!({
        "name": d.name,
        "description": d.description,
        "plugin": d.plugin,
        "action": d.action,
        "class": d.class.as_str(),
        "diagnostic": d.diagnostic,
        "timeout_ms": d.timeout_ms,
        "parameters": d.parameters,
        "columns": columns,
    })
}

pub async fn list_definitions(ctx: &ToolContext, args: args::ListDefinitions) -> ToolResult {
    let pager = Pager::of(&args, usize::MAX)?;
    let switches = ctx.services().fleet().kill_switches();
    let runs_now = |d: &Definition| !switches.iter().any(|k| k.stops(&d.plugin, &d.action));
    let definitions: Vec<Value> = instructions()
        .definitions
        .iter()
        .filter(|d| args.plugin.as_deref().is_none_or(|p| p == d.plugin))
        .filter(|d| args.class.as_deref().is_none_or(|c| c == d.class.as_str()))
        .filter(|d| args.diagnostic.is_none_or(|diagnostic| diagnostic == d.diagnostic))
        .filter(|d| args.enabled.is_none_or(|enabled| enabled == runs_now(d)))
        .map(definition_json)
        .collect();
    let (definitions, count) = pager.window(definitions);
    pager.answer(ctx, json!({"count": count}), "definitions", definitions, count)
}

pub async fn get_definition(_ctx: &ToolContext, args: args::GetDefinition) -> ToolResult {
    Ok(ToolOutput::Structured(definition_json(definition(&args.name)?)))
}

pub async fn discover_instructions(ctx: &ToolContext, args: args::DiscoverInstructions) -> ToolResult {
    let pager = Pager::of(&args, usize::MAX)?;
    let list: Vec<Value> = instructions()
        .definitions
        .iter()
        .map(|d| {
            json!({
                "name": d.name,
                "class": d.class.as_str(),
                "diagnostic": d.diagnostic,
                "description": d.description,
                "parameters": d.parameters.get("properties").cloned().unwrap_or_else(|| json!({})),
            })
        })
        .collect();
    let how = "execute_instruction {definition, params, agent_ids | scope} returns execution_id; poll \
               get_execution_status (no sooner than retry_after_ms) until finished, then read rows with \
               query_responses or group them with aggregate_responses. Changing instructions need \
               approval at the supervised tier; execute_bundle runs several in order.";
    let (list, count) = pager.window(list);
    pager.answer(ctx, json!({"how_to_run": how}), "instructions", list, count)
}

pub async fn discover_plugins(ctx: &ToolContext, args: args::DiscoverPlugins) -> ToolResult {
    let pager = Pager::of(&args, usize::MAX)?;
    let set = instructions();
    let plugins: Vec<Value> = set
        .plugins
        .iter()
        .map(|p| {
            let actions: Vec<Value> = p
                .actions
                .iter()
                .map(|a| {
                    let used_by: Vec<&str> = set
                        .definitions
                        .iter()
                        .filter(|d| d.plugin == p.plugin && d.action == a.name)
                        .map(|d| d.name.as_str())
                        .collect();
                    json!({
                        "name": a.name,
                        "description": a.description,
                        "class": a.class.as_str(),
                        "params": a.params.iter().map(|x| json!({"name": x.name, "type": x.kind.json_type(), "required": x.required, "description": x.description})).collect::<Vec<_>>(),
                        "columns": a.columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
                        "definitions": used_by,
                    })
                })
                .collect();
            json!({"plugin": p.plugin, "description": p.description, "actions": actions})
        })
        .collect();
    let (plugins, count) = pager.window(plugins);
    pager.answer(ctx, json!({}), "plugins", plugins, count)
}


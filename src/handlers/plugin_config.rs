//! Plugin configuration values and kill switches, kept in the embedded store.

use serde_json::json;

use crate::registry::args;
use crate::tool::{ToolContext, ToolError, ToolOutput, ToolResult};

pub async fn list_plugin_config(ctx: &ToolContext, args: args::ListPluginConfig) -> ToolResult {
    let limit = args.limit.unwrap_or(100).clamp(1, 1000) as usize;
    let mut entries = ctx.store.list_plugin_config(args.plugin.as_deref().filter(|p| !p.is_empty()))?;
    let truncated = entries.len() > limit;
    entries.truncate(limit);
    Ok(ToolOutput::Structured(json!({ "count": entries.len(), "truncated": truncated, "entries": entries })))
}

pub async fn get_plugin_config(ctx: &ToolContext, args: args::GetPluginConfig) -> ToolResult {
    match ctx.store.get_plugin_config(&args.plugin, &args.key)? {
        Some(entry) => Ok(ToolOutput::Structured(json!(entry))),
        None => Err(ToolError::NotFound(format!(
            "plugin `{}` has no config key `{}`; list_plugin_config shows the keys that exist",
            args.plugin, args.key
        ))),
    }
}

pub async fn set_plugin_config(ctx: &ToolContext, args: args::SetPluginConfig) -> ToolResult {
    let previous =
        ctx.store.set_plugin_config(&args.plugin, &args.key, &args.value, ctx.clock.now_secs(), &ctx.principal.name)?;
    Ok(ToolOutput::Structured(json!({
        "plugin": args.plugin,
        "key": args.key,
        "value": args.value,
        "previous_value": previous,
        "created": previous.is_none(),
    })))
}

pub async fn delete_plugin_config(ctx: &ToolContext, args: args::DeletePluginConfig) -> ToolResult {
    match ctx.store.delete_plugin_config(&args.plugin, &args.key)? {
        Some(value) => Ok(ToolOutput::Structured(json!({
            "plugin": args.plugin,
            "key": args.key,
            "deleted_value": value,
        }))),
        None => Err(ToolError::NotFound(format!(
            "plugin `{}` has no config key `{}`; nothing was deleted",
            args.plugin, args.key
        ))),
    }
}

pub async fn get_plugin_kill_switch(ctx: &ToolContext, args: args::GetPluginKillSwitch) -> ToolResult {
    let switch = ctx.store.get_kill_switch(&args.plugin, args.action.as_deref().filter(|a| !a.is_empty()))?;
    Ok(ToolOutput::Structured(json!(switch)))
}

pub async fn set_plugin_kill_switch(ctx: &ToolContext, args: args::SetPluginKillSwitch) -> ToolResult {
    let action = args.action.as_deref().filter(|a| !a.is_empty());
    let before = ctx.store.get_kill_switch(&args.plugin, action)?;
    let after = ctx.store.set_kill_switch(
        &args.plugin,
        action,
        args.enabled,
        args.reason.as_deref(),
        ctx.clock.now_secs(),
        &ctx.principal.name,
    )?;
    Ok(ToolOutput::Structured(json!({
        "plugin": after.plugin,
        "action": after.action,
        "enabled": after.enabled,
        "reason": after.reason,
        "was_enabled": before.enabled,
        "updated_at": after.updated_at,
        "updated_by": after.updated_by,
    })))
}

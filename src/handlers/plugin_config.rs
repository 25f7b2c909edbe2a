//! Plugin configuration values and kill switches, kept in the store.

use serde_json::json;
use toolgate_domain::records::Change;
use toolgate_domain::{ToolError, ToolOutput, ToolResult};

use super::pages::Pager;
use crate::args;
use crate::services::ToolContext;

fn change(ctx: &ToolContext) -> Change<'_> {
    Change { at: ctx.services().clock().now_secs(), by: &ctx.principal().name }
}

pub async fn list_plugin_config(ctx: &ToolContext, args: args::ListPluginConfig) -> ToolResult {
    let pager = Pager::of(&args, 100)?;
    let entries = ctx.services().plugin_config().list(args.plugin.as_deref().filter(|p| !p.is_empty())).await?;
    let (entries, count) = pager.window(entries);
    let entries = entries.iter().map(|entry| json!(entry)).collect();
    pager.answer(ctx, json!({"count": count}), "entries", entries, count)
}

pub async fn get_plugin_config(ctx: &ToolContext, args: args::GetPluginConfig) -> ToolResult {
    match ctx.services().plugin_config().get(&args.plugin, &args.key).await? {
        Some(entry) => Ok(ToolOutput::Structured(json!(entry))),
        None => Err(ToolError::NotFound(format!(
            "plugin `{}` has no config key `{}`; list_plugin_config shows the keys that exist",
            args.plugin, args.key
        ))),
    }
}

/// Sets a value; the actions that declare the key are given it with every run sent from now
/// on (`read_by`: none reads a key no action declares).
pub async fn set_plugin_config(ctx: &ToolContext, args: args::SetPluginConfig) -> ToolResult {
    let previous = ctx.services().plugin_config().set(&args.plugin, &args.key, &args.value, change(ctx)).await?;
    let read_by = crate::instructions::instructions().config_readers(&args.plugin, &args.key);
    Ok(ToolOutput::Structured(json!({
        "plugin": args.plugin,
        "key": args.key,
        "value": args.value,
        "previous_value": previous,
        "created": previous.is_none(),
        "read_by": read_by,
    })))
}

/// Deleting a setting that is already absent is success with `changed: false`.
pub async fn delete_plugin_config(ctx: &ToolContext, args: args::DeletePluginConfig) -> ToolResult {
    let deleted = ctx.services().plugin_config().delete(&args.plugin, &args.key).await?;
    Ok(ToolOutput::Structured(json!({
        "plugin": args.plugin,
        "key": args.key,
        "changed": deleted.is_some(),
        "deleted_value": deleted,
    })))
}

/// A kill switch's plugin and action (None: the whole plugin), as instructions.yaml declares
/// them: a switch on a name nothing runs would stop nothing.
fn switch_of<'a>(plugin: &str, action: Option<&'a str>) -> Result<Option<&'a str>, ToolError> {
    let action = action.filter(|a| !a.is_empty());
    crate::instructions::instructions().check_plugin(plugin, action).map_err(ToolError::InvalidArguments)?;
    Ok(action)
}

pub async fn get_plugin_kill_switch(ctx: &ToolContext, args: args::GetPluginKillSwitch) -> ToolResult {
    let action = switch_of(&args.plugin, args.action.as_deref())?;
    let switch = ctx.services().plugin_config().kill_switch(&args.plugin, action).await?;
    Ok(ToolOutput::Structured(json!(switch)))
}

/// Sets a switch; engaged, it stops the plugin (or action) on the whole fleet at once: new
/// executions are refused, targets not yet sent are refused, agents are told (docs/instructions.md).
pub async fn set_plugin_kill_switch(ctx: &ToolContext, args: args::SetPluginKillSwitch) -> ToolResult {
    let store = ctx.services().plugin_config();
    let action = switch_of(&args.plugin, args.action.as_deref())?;
    let before = store.kill_switch(&args.plugin, action).await?;
    let after =
        store.set_kill_switch(&args.plugin, action, args.enabled, args.reason.as_deref(), change(ctx)).await?;
    let stopped = ctx.services().fleet().kill_switches_changed().await?;
    Ok(ToolOutput::Structured(json!({
        "plugin": after.plugin,
        "action": after.action,
        "enabled": after.enabled,
        "reason": after.reason,
        "was_enabled": before.enabled,
        "updated_at": after.updated_at,
        "updated_by": after.updated_by,
        "stopped_executions": stopped,
    })))
}

//! Tags on agents.

use serde_json::json;

use crate::registry::args;
use crate::tool::{ToolContext, ToolError, ToolOutput, ToolResult};

pub async fn get_tags(ctx: &ToolContext, args: args::GetTags) -> ToolResult {
    let tags = ctx.store.agent_tags(&args.agent_id)?;
    Ok(ToolOutput::Structured(json!({ "agent_id": args.agent_id, "tags": tags })))
}

pub async fn set_tag(ctx: &ToolContext, args: args::SetTag) -> ToolResult {
    let previous =
        ctx.store.set_agent_tag(&args.agent_id, &args.key, &args.value, ctx.clock.now_secs(), &ctx.principal.name)?;
    Ok(ToolOutput::Structured(json!({
        "agent_id": args.agent_id,
        "key": args.key,
        "value": args.value,
        "previous_value": previous,
    })))
}

pub async fn delete_tag(ctx: &ToolContext, args: args::DeleteTag) -> ToolResult {
    match ctx.store.delete_agent_tag(&args.agent_id, &args.key)? {
        Some(value) => Ok(ToolOutput::Structured(json!({
            "agent_id": args.agent_id,
            "key": args.key,
            "deleted_value": value,
        }))),
        None => Err(ToolError::NotFound(format!(
            "agent `{}` has no tag `{}`; get_tags lists its tags; nothing was deleted",
            args.agent_id, args.key
        ))),
    }
}

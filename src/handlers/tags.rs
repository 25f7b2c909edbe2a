//! Tags on agents: only on agents the fleet knows (an unknown id names the closest ones).

use serde_json::json;
use toolgate_domain::records::Change;
use toolgate_domain::{ToolOutput, ToolResult};

use super::fleet::ensure_known;
use crate::args;
use crate::services::ToolContext;

pub async fn get_tags(ctx: &ToolContext, args: args::GetTags) -> ToolResult {
    ensure_known(ctx, &args.agent_id)?;
    let tags = ctx.services().tags().agent_tags(&args.agent_id).await?;
    Ok(ToolOutput::Structured(json!({ "agent_id": args.agent_id, "tags": tags })))
}

pub async fn set_tag(ctx: &ToolContext, args: args::SetTag) -> ToolResult {
    ensure_known(ctx, &args.agent_id)?;
    let change = Change { at: ctx.services().clock().now_secs(), by: &ctx.principal().name };
    let previous = ctx.services().tags().set_agent_tag(&args.agent_id, &args.key, &args.value, change).await?;
    Ok(ToolOutput::Structured(json!({
        "agent_id": args.agent_id,
        "key": args.key,
        "value": args.value,
        "previous_value": previous,
    })))
}

/// Deleting a tag that is already absent is the state the caller asked for: success with
/// `changed: false` (a retry after a lost answer must not fail).
pub async fn delete_tag(ctx: &ToolContext, args: args::DeleteTag) -> ToolResult {
    ensure_known(ctx, &args.agent_id)?;
    let deleted = ctx.services().tags().delete_agent_tag(&args.agent_id, &args.key).await?;
    Ok(ToolOutput::Structured(json!({
        "agent_id": args.agent_id,
        "key": args.key,
        "changed": deleted.is_some(),
        "deleted_value": deleted,
    })))
}

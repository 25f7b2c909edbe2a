//! Tags on agents: only on agents the caller may see (an unknown id names the closest ones).

use serde_json::json;
use toolgate_domain::fleet::scope::parse;
use toolgate_domain::groups::{ManagementGroup, at_or_below};
use toolgate_domain::records::Change;
use toolgate_domain::{ToolError, ToolOutput, ToolResult};

use super::confined::one_agent;
use super::pages::Pager;
use crate::args;
use crate::services::ToolContext;

/// A tag some group's rule reads decides membership: only a fleet-wide Tag grant, or the
/// owner role on every group whose rule reads it (policy.yaml `server.group_owner_role`), may
/// write or delete it, so that a team cannot move an agent into or out of another team's group.
async fn ensure_may_change(ctx: &ToolContext, key: &str) -> Result<(), ToolError> {
    if ctx.reach().is_fleet() {
        return Ok(());
    }
    let groups = ctx.services().groups().management_groups().await?;
    let owner = ctx.services().catalogue().group_owner_role;
    let owned: Vec<&str> = ctx
        .principal()
        .group_roles
        .iter()
        .filter(|held| Some(held.role.as_str()) == owner)
        .map(|held| held.group_id.as_str())
        .collect();
    let reads = |g: &&ManagementGroup| {
        g.rule.as_deref().and_then(|r| parse(r).ok()).is_some_and(|rule| rule.tag_keys().iter().any(|(k, _)| *k == key))
    };
    match groups.iter().filter(reads).find(|g| !at_or_below(&groups, &g.id, &owned)) {
        None => Ok(()),
        Some(group) => Err(ToolError::Refused {
            message: format!(
                "`{key}` is a membership tag (the rule of management group `{}` reads it): your Tag grant covers only your groups' agents",
                group.name
            ),
            remediation: "ask someone with a fleet-wide Tag grant or that group's owner to change it, or use a tag no group rule reads".into(),
        }),
    }
}

pub async fn get_tags(ctx: &ToolContext, args: args::GetTags) -> ToolResult {
    one_agent(ctx, &args.agent_id).await?;
    let pager = Pager::of(&args, usize::MAX)?;
    let (tags, count) = pager.window(ctx.services().tags().agent_tags(&args.agent_id).await?);
    let tags = tags.iter().map(|tag| json!(tag)).collect();
    pager.answer(ctx, json!({"agent_id": args.agent_id}), "tags", tags, count)
}

pub async fn set_tag(ctx: &ToolContext, args: args::SetTag) -> ToolResult {
    one_agent(ctx, &args.agent_id).await?;
    ensure_may_change(ctx, &args.key).await?;
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
    one_agent(ctx, &args.agent_id).await?;
    ensure_may_change(ctx, &args.key).await?;
    let deleted = ctx.services().tags().delete_agent_tag(&args.agent_id, &args.key).await?;
    Ok(ToolOutput::Structured(json!({
        "agent_id": args.agent_id,
        "key": args.key,
        "changed": deleted.is_some(),
        "deleted_value": deleted,
    })))
}

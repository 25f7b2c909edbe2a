//! The caller's part of the fleet, as handlers read it: the agents its grant of the tool's
//! pair covers ([`ToolContext::reach`]), read from the store at the time of the call, and the
//! labels (tags, groups) filters and scopes read. An agent outside it reads exactly as one
//! that does not exist: same error, same "did you mean" (drawn from what it may see).

use toolgate_domain::ToolError;
use toolgate_domain::groups::Visible;
use toolgate_fleet::{GroupIndex, Labels, TagIndex};
use toolgate_policy::closest;

use crate::services::ToolContext;

/// The agents the caller may see or act on with this tool, now.
pub(crate) async fn visible(ctx: &ToolContext) -> Result<Visible, ToolError> {
    Ok(ctx.services().groups().visible(ctx.reach()).await?)
}

/// The tags of the agents the caller may see (the keys a scope may name are theirs).
pub(crate) async fn tag_index(ctx: &ToolContext, visible: &Visible) -> Result<TagIndex, ToolError> {
    let mut rows = ctx.services().fleet().store().all_tags(ctx.reach()).await?;
    rows.retain(|(agent, _, _)| visible.contains(agent));
    Ok(TagIndex::new(rows))
}

/// The tags and groups of the agents the caller may see, for a scope expression.
pub(crate) async fn labels(ctx: &ToolContext, visible: &Visible) -> Result<Labels, ToolError> {
    let groups = ctx.services().groups();
    let (all, mut memberships) = (groups.management_groups().await?, groups.memberships().await?);
    memberships.retain(|(agent, _)| visible.contains(agent));
    let groups = GroupIndex::new(toolgate_store::group_labels(&all, &memberships));
    Ok(Labels { tags: tag_index(ctx, visible).await?, groups })
}

/// An error for an agent id the caller cannot see (unknown, or outside its groups: the same
/// answer), naming the closest ids it can.
pub(crate) fn ensure_known(ctx: &ToolContext, visible: &Visible, agent_id: &str) -> Result<(), ToolError> {
    let fleet = ctx.services().fleet();
    if fleet.knows(visible, agent_id) {
        return Ok(());
    }
    let ids = fleet.agent_ids(visible);
    let close = closest(agent_id, ids.iter().map(String::as_str));
    // With thousands of agents the full list is no help: name the close ones, or count them.
    let hint = match (ids.len(), close.as_slice()) {
        (0, _) if visible.is_all() => {
            "no agent has enrolled yet (toolgate enroll-token create, then toolgate agent run on the endpoint)".into()
        }
        (0, _) => "no agent is in your management groups yet".into(),
        (_, []) => format!("no agent's id you can see is close to it ({} visible)", ids.len()),
        (_, [one]) => format!("did you mean `{one}`?"),
        (_, many) => {
            format!("did you mean one of {}?", many.iter().map(|id| format!("`{id}`")).collect::<Vec<_>>().join(", "))
        }
    };
    Err(ToolError::NotFound(format!("no agent `{agent_id}`: {hint}; list_agents lists them")))
}

/// [`visible`] then [`ensure_known`]: for the tools that name one agent.
pub(crate) async fn one_agent(ctx: &ToolContext, agent_id: &str) -> Result<Visible, ToolError> {
    let visible = visible(ctx).await?;
    ensure_known(ctx, &visible, agent_id)?;
    Ok(visible)
}

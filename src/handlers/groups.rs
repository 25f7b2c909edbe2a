//! Management groups over MCP (docs/groups.md): the tree, its members and the roles held on
//! it. A caller whose grant reaches only some groups sees and changes those and the groups
//! below them; any other group reads exactly as an unknown one. What would widen a caller's
//! reach (a rule, which reads the whole fleet; a parent outside its groups; a member it cannot
//! see; a role beyond its own) is refused.

use serde_json::{Value, json};
use toolgate_domain::audit::{AuditEvent, AuditOutcome, TargetType};
use toolgate_domain::groups::{GroupRefusal, ManagementGroup, ROOT_GROUP, Reach, at_or_below, check_name, check_rule};
use toolgate_domain::records::Change;
use toolgate_domain::{ToolError, ToolOutput, ToolResult};
use toolgate_policy::did_you_mean;
use toolgate_store::{GroupUpdate, NewGroup};

use super::confined::{one_agent, visible};
use super::pages::Pager;
use crate::args;
use crate::services::ToolContext;

/// Whether `id` is one of the reach's groups or below one.
fn within(groups: &[ManagementGroup], reach: &Reach, id: &str) -> bool {
    let Some(mine) = reach.groups() else { return true };
    let mine: Vec<&str> = mine.iter().map(String::as_str).collect();
    at_or_below(groups, id, &mine)
}

/// Every group and the one `id` names, if the caller may see it; else the unknown-group
/// error (naming only groups it may see).
async fn visible_group(ctx: &ToolContext, id: &str) -> Result<(Vec<ManagementGroup>, ManagementGroup), ToolError> {
    let groups = ctx.services().groups().management_groups().await?;
    if let Some(group) = groups.iter().find(|g| g.id == id && within(&groups, ctx.reach(), id)) {
        return Ok((groups.clone(), group.clone()));
    }
    let known: Vec<&str> =
        groups.iter().filter(|g| within(&groups, ctx.reach(), &g.id)).map(|g| g.id.as_str()).collect();
    let hint = if known.is_empty() { "you can see no group".to_string() } else { did_you_mean(id, known.iter().copied()) };
    Err(ToolError::NotFound(format!("no management group `{id}`: {hint}; list_management_groups lists them")))
}

/// [`visible_group`] by id, or by name where one group the caller sees has it.
pub(super) async fn visible_group_named(
    ctx: &ToolContext,
    named: &str,
) -> Result<(Vec<ManagementGroup>, ManagementGroup), ToolError> {
    let groups = ctx.services().groups().management_groups().await?;
    let mut by_name = groups.iter().filter(|g| g.name == named && within(&groups, ctx.reach(), &g.id));
    match (by_name.next(), by_name.next()) {
        (Some(one), None) if !groups.iter().any(|g| g.id == named) => Ok((groups.clone(), one.clone())),
        _ => visible_group(ctx, named).await,
    }
}

fn refused(refusal: GroupRefusal) -> ToolError {
    match refusal {
        GroupRefusal::Unknown(_) | GroupRefusal::UnknownAgent(_) => ToolError::NotFound(refusal.to_string()),
        other => ToolError::InvalidArguments(other.to_string()),
    }
}

/// Only a fleet-wide grant may set a rule: a rule chooses among every agent.
fn ensure_fleet_for_rule(ctx: &ToolContext) -> Result<(), ToolError> {
    match ctx.reach().is_fleet() {
        true => Ok(()),
        false => Err(ToolError::Refused {
            message: "a membership rule chooses among the whole fleet, and your grant reaches only your groups".into(),
            remediation: "add members by id (add_management_group_member), or ask someone with a fleet-wide ManagementGroup grant to set the rule".into(),
        }),
    }
}

/// The audit row of a change to a group, with what it was and what it is (beside the call's
/// own row, which records the arguments).
async fn audit_change(ctx: &ToolContext, action: &str, group_id: &str, detail: String) {
    let event = AuditEvent::new(ctx.services().clock().now_ms(), action, AuditOutcome::Success)
        .by(ctx.caller())
        .target(TargetType::ManagementGroup, group_id.to_string())
        .detail(detail)
        .correlation(ctx.correlation_id());
    ctx.services().audit().record_durable(event).await;
}

/// A group the caller may put groups under: one of its own, or the root for a fleet-wide grant.
async fn ensure_parent(ctx: &ToolContext, parent: &str) -> Result<(), ToolError> {
    if parent == ROOT_GROUP && !ctx.reach().is_fleet() {
        return Err(ToolError::Refused {
            message: "only a fleet-wide grant may put a group directly under the root".into(),
            remediation: "give `parent_id` one of your groups (list_management_groups lists them)".into(),
        });
    }
    visible_group(ctx, parent).await.map(drop)
}

fn change(ctx: &ToolContext) -> Change<'_> {
    Change { at: ctx.services().clock().now_secs(), by: &ctx.principal().name }
}

pub async fn list_management_groups(ctx: &ToolContext, args: args::ListManagementGroups) -> ToolResult {
    let pager = Pager::of(&args, usize::MAX)?;
    let groups = ctx.services().groups().management_groups().await?;
    let mine: Vec<&ManagementGroup> = groups.iter().filter(|g| within(&groups, ctx.reach(), &g.id)).collect();
    let (mine, count) = pager.window(mine);
    let mine = mine.into_iter().map(|group| json!(group)).collect();
    pager.answer(ctx, json!({"count": count}), "groups", mine, count)
}

pub async fn get_management_group(ctx: &ToolContext, args: args::GetManagementGroup) -> ToolResult {
    let pager = Pager::of(&args, usize::MAX)?;
    let (groups, group) = visible_group(ctx, &args.group_id).await?;
    let children: Vec<&str> =
        groups.iter().filter(|g| g.parent_id.as_deref() == Some(&group.id)).map(|g| g.id.as_str()).collect();
    let members = match group.is_root() {
        true => vec![],
        false => ctx.services().groups().members(&group.id).await?.map_err(refused)?,
    };
    let reach = Reach::Groups(vec![group.id.clone()].into());
    let agents = match group.is_root() {
        true => ctx.services().fleet().agent_ids(&visible(ctx).await?).len(),
        false => match ctx.services().groups().visible(&reach).await? {
            toolgate_domain::groups::Visible::Only(ids) => ids.len(),
            toolgate_domain::groups::Visible::All => ctx.services().fleet().enrolled(),
        },
    };
    let (members, count) = pager.window(members);
    let members: Vec<Value> = members
        .into_iter()
        .map(|m| json!({"agent_id": m.agent_id, "explicit": m.explicit, "by_rule": m.by_rule}))
        .collect();
    pager.answer(ctx, json!({"group": group, "children": children, "agents": agents}), "members", members, count)
}

pub async fn create_management_group(ctx: &ToolContext, args: args::CreateManagementGroup) -> ToolResult {
    let name = check_name(&args.name).map_err(ToolError::InvalidArguments)?;
    let parent = args.parent_id.as_deref().unwrap_or(ROOT_GROUP);
    ensure_parent(ctx, parent).await?;
    if let Some(rule) = &args.rule {
        ensure_fleet_for_rule(ctx)?;
        check_rule(rule).map_err(|e| ToolError::InvalidArguments(format!("rule: {e} (validate_scope explains)")))?;
    }
    let description = args.description.as_deref().unwrap_or_default();
    let new = NewGroup { name, description, parent_id: parent, rule: args.rule.as_deref(), change: change(ctx) };
    let group = ctx.services().groups().create_group(new).await?.map_err(refused)?;
    audit_change(ctx, "group.create", &group.id, format!("created {}", group.summary())).await;
    Ok(ToolOutput::Structured(json!({"group": group})))
}

pub async fn update_management_group(ctx: &ToolContext, args: args::UpdateManagementGroup) -> ToolResult {
    visible_group(ctx, &args.group_id).await?;
    let name = args.name.as_deref().map(check_name).transpose().map_err(ToolError::InvalidArguments)?;
    if let Some(parent) = &args.parent_id {
        ensure_parent(ctx, parent).await?;
    }
    let rule = match (&args.rule, args.remove_rule.unwrap_or(false)) {
        (Some(_), true) => {
            return Err(ToolError::InvalidArguments("give `rule` or `remove_rule: true`, not both".into()));
        }
        (Some(rule), false) => {
            ensure_fleet_for_rule(ctx)?;
            check_rule(rule).map_err(|e| ToolError::InvalidArguments(format!("rule: {e} (validate_scope explains)")))?;
            Some(Some(rule.as_str()))
        }
        (None, true) => {
            ensure_fleet_for_rule(ctx)?;
            Some(None)
        }
        (None, false) => None,
    };
    let update =
        GroupUpdate { name, description: args.description.as_deref(), parent_id: args.parent_id.as_deref(), rule };
    let (before, after) = ctx.services().groups().update_group(&args.group_id, update, change(ctx)).await?.map_err(refused)?;
    let detail = format!("before: {}; after: {}", before.summary(), after.summary());
    audit_change(ctx, "group.update", &args.group_id, detail).await;
    Ok(ToolOutput::Structured(json!({"before": before, "after": after})))
}

pub async fn delete_management_group(ctx: &ToolContext, args: args::DeleteManagementGroup) -> ToolResult {
    visible_group(ctx, &args.group_id).await?;
    let gone = ctx.services().groups().delete_group(&args.group_id).await?.map_err(refused)?;
    audit_change(ctx, "group.delete", &args.group_id, format!("deleted {}", gone.summary())).await;
    Ok(ToolOutput::Structured(json!({"deleted": gone})))
}

pub async fn add_management_group_member(ctx: &ToolContext, args: args::AddManagementGroupMember) -> ToolResult {
    visible_group(ctx, &args.group_id).await?;
    // An agent the caller cannot see reads as unknown (and could not widen its reach).
    one_agent(ctx, &args.agent_id).await?;
    let added = ctx.services().groups().add_member(&args.group_id, &args.agent_id).await?.map_err(refused)?;
    if added {
        audit_change(ctx, "group.member_add", &args.group_id, format!("agent {} added", args.agent_id)).await;
    }
    Ok(ToolOutput::Structured(json!({"group_id": args.group_id, "agent_id": args.agent_id, "changed": added})))
}

pub async fn remove_management_group_member(ctx: &ToolContext, args: args::RemoveManagementGroupMember) -> ToolResult {
    visible_group(ctx, &args.group_id).await?;
    one_agent(ctx, &args.agent_id).await?;
    let removed = ctx.services().groups().remove_member(&args.group_id, &args.agent_id).await?.map_err(refused)?;
    if removed {
        audit_change(ctx, "group.member_remove", &args.group_id, format!("agent {} removed", args.agent_id)).await;
    }
    Ok(ToolOutput::Structured(json!({"group_id": args.group_id, "agent_id": args.agent_id, "changed": removed})))
}

pub async fn list_management_group_roles(ctx: &ToolContext, args: args::ListManagementGroupRoles) -> ToolResult {
    visible_group(ctx, &args.group_id).await?;
    let pager = Pager::of(&args, usize::MAX)?;
    let (roles, count) = pager.window(ctx.services().groups().group_roles(Some(&args.group_id)).await?);
    let roles: Vec<Value> = roles
        .into_iter()
        .map(|r| json!({"principal": r.principal, "role": r.role, "granted_at": r.granted_at, "granted_by": r.granted_by}))
        .collect();
    pager.answer(ctx, json!({"group_id": args.group_id}), "roles", roles, count)
}

/// A role policy.yaml declares, and (for an owner confined to its groups) one that grants
/// nothing its own owner role does not.
fn ensure_grantable(ctx: &ToolContext, role: &str) -> Result<(), ToolError> {
    let catalogue = ctx.services().catalogue();
    let Some(wanted) = catalogue.roles.iter().find(|r| r.name == role) else {
        let hint = did_you_mean(role, catalogue.role_names());
        return Err(ToolError::InvalidArguments(format!("no role `{role}` in policy.yaml; {hint}")));
    };
    if ctx.reach().is_fleet() {
        return Ok(());
    }
    let own = catalogue.group_owner_role.and_then(|owner| catalogue.roles.iter().find(|r| r.name == owner));
    let covered = |pattern: &toolgate_policy::Pattern| {
        own.is_some_and(|own| {
            own.grants.iter().any(|mine| {
                mine.securable.is_none_or(|s| pattern.securable == Some(s))
                    && mine.operation.is_none_or(|o| pattern.operation == Some(o))
            })
        })
    };
    match wanted.grants.iter().find(|p| !covered(p)) {
        None => Ok(()),
        Some(beyond) => Err(ToolError::Refused {
            message: format!("`{role}` grants {}, beyond what a group's owner holds", beyond.text()),
            remediation: "grant a role within the owner role, or ask someone with a fleet-wide grant".into(),
        }),
    }
}

pub async fn assign_management_group_role(ctx: &ToolContext, args: args::AssignManagementGroupRole) -> ToolResult {
    visible_group(ctx, &args.group_id).await?;
    ensure_grantable(ctx, &args.role)?;
    let credentials = ctx.services().credentials();
    let Some(holder) = credentials.principal(&args.principal).await? else {
        return Err(ToolError::NotFound(format!("no principal `{}`", args.principal)));
    };
    if let Some(message) = ctx.services().catalogue().engines.refusal_to_hold(holder.kind, &args.principal, &args.role) {
        return Err(ToolError::Refused { message, remediation: "give it a role that is not human-only".into() });
    }
    let added = credentials.assign_group_role(&args.principal, &args.group_id, &args.role, change(ctx)).await?.map_err(refused)?;
    if added {
        let detail = format!("{} now holds {} (did not before)", args.principal, args.role);
        audit_change(ctx, "group.role_assign", &args.group_id, detail).await;
    }
    Ok(ToolOutput::Structured(
        json!({"group_id": args.group_id, "principal": args.principal, "role": args.role, "changed": added}),
    ))
}

pub async fn unassign_management_group_role(ctx: &ToolContext, args: args::UnassignManagementGroupRole) -> ToolResult {
    visible_group(ctx, &args.group_id).await?;
    let removed = ctx.services().credentials().unassign_group_role(&args.principal, &args.group_id, &args.role).await?;
    if removed {
        let detail = format!("{} no longer holds {} (held it before)", args.principal, args.role);
        audit_change(ctx, "group.role_unassign", &args.group_id, detail).await;
    }
    Ok(ToolOutput::Structured(
        json!({"group_id": args.group_id, "principal": args.principal, "role": args.role, "changed": removed}),
    ))
}

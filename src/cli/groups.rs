//! `toolgate group ...`: management groups from the console (docs/groups.md), beside the
//! MCP tools. Like the other console commands they open the server's store directly; every
//! change is audited with what it was before and after.

use anyhow::{Result, bail};
use clap::Subcommand;
use toolgate_domain::Clock;
use toolgate_domain::audit::{AuditEvent, AuditOutcome, TargetType};
use toolgate_domain::groups::{ROOT_GROUP, check_name, check_rule};
use toolgate_domain::records::Change;
use toolgate_domain::text::escape_controls;
use toolgate_store::{GroupUpdate, NewGroup, Repositories};

use crate::registry::CATALOGUE;

/// Who the console's changes are by, in the group records and the audit log.
const CONSOLE: &str = "console";

#[derive(Subcommand)]
pub enum GroupCommand {
    /// Create a group under the root (or --parent); a --rule chooses members as agents enroll
    /// and their facts or tags change.
    Create {
        name: String,
        #[arg(long, default_value = ROOT_GROUP)]
        parent: String,
        /// A scope expression (docs/scope.md), e.g. 'tag:team = payments'.
        #[arg(long)]
        rule: Option<String>,
        #[arg(long, default_value = "")]
        description: String,
    },
    /// List every group: id, parent, rule.
    List,
    /// One group: its members (and how each came in) and the roles held on it.
    Show { group: String },
    /// Rename, describe, move or re-rule a group.
    Update {
        group: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        description: Option<String>,
        #[arg(long)]
        parent: Option<String>,
        #[arg(long, conflicts_with = "no_rule")]
        rule: Option<String>,
        /// Remove the rule: its rule members leave, explicit ones stay.
        #[arg(long)]
        no_rule: bool,
    },
    /// Delete a group that holds no other group; its members and roles go with it.
    Delete { group: String },
    /// Add an enrolled agent to a group by id.
    AddMember { group: String, agent_id: String },
    /// Take an explicit member out (a rule member stays while the rule matches it).
    RemoveMember { group: String, agent_id: String },
    /// Grant a principal a policy.yaml role over the group's agents only.
    Assign { group: String, principal: String, role: String },
    /// Take that role away.
    Unassign { group: String, principal: String, role: String },
}

pub async fn run(store: &Repositories, command: GroupCommand) -> Result<String> {
    let now = Clock::default().now_secs();
    let change = Change { at: now, by: CONSOLE };
    match command {
        GroupCommand::Create { name, parent, rule, description } => {
            let name = check_name(&name).map_err(anyhow::Error::msg)?;
            if let Some(rule) = &rule {
                check_rule(rule).map_err(|e| anyhow::anyhow!("--rule: {e}"))?;
            }
            let new = NewGroup { name, description: &description, parent_id: &parent, rule: rule.as_deref(), change };
            let group = store.groups.create_group(new).await??;
            audit(store, "console.group_create", &group.id, format!("created {}", group.summary())).await;
            Ok(format!("created group {} `{}`\n", group.id, group.name))
        }
        GroupCommand::List => list(store).await,
        GroupCommand::Show { group } => show(store, &group).await,
        GroupCommand::Update { group, name, description, parent, rule, no_rule } => {
            let name = name.as_deref().map(check_name).transpose().map_err(anyhow::Error::msg)?;
            if let Some(rule) = &rule {
                check_rule(rule).map_err(|e| anyhow::anyhow!("--rule: {e}"))?;
            }
            let rule = if no_rule { Some(None) } else { rule.as_deref().map(Some) };
            let update = GroupUpdate { name, description: description.as_deref(), parent_id: parent.as_deref(), rule };
            let (before, after) = store.groups.update_group(&group, update, change).await??;
            let detail = format!("before: {}; after: {}", before.summary(), after.summary());
            audit(store, "console.group_update", &group, detail).await;
            Ok(format!("updated group {group}: {}\n", after.summary()))
        }
        GroupCommand::Delete { group } => {
            let gone = store.groups.delete_group(&group).await??;
            audit(store, "console.group_delete", &group, format!("deleted {}", gone.summary())).await;
            Ok(format!("deleted group {group} `{}`\n", gone.name))
        }
        GroupCommand::AddMember { group, agent_id } => {
            let added = store.groups.add_member(&group, &agent_id).await??;
            audit(store, "console.group_member_add", &group, format!("agent {agent_id}; was a member: {}", !added))
                .await;
            Ok(format!("{agent_id} {} in group {group}\n", if added { "is now" } else { "was already" }))
        }
        GroupCommand::RemoveMember { group, agent_id } => {
            let removed = store.groups.remove_member(&group, &agent_id).await??;
            audit(store, "console.group_member_remove", &group, format!("agent {agent_id}; was a member: {removed}"))
                .await;
            Ok(format!(
                "{agent_id} {} an explicit member of group {group}\n",
                if removed { "is no longer" } else { "was not" }
            ))
        }
        GroupCommand::Assign { group, principal, role } => {
            known_role(&role)?;
            let Some(holder) = store.credentials.principal(&principal).await? else {
                bail!("no principal `{principal}` (`toolgate principal list` shows them)");
            };
            if let Some(why) = CATALOGUE.engines.refusal_to_hold(holder.kind, &principal, &role) {
                bail!("{why}");
            }
            let added = store.credentials.assign_group_role(&principal, &group, &role, change).await??;
            audit(
                store,
                "console.group_role_assign",
                &group,
                format!("{principal} holds {role}; held before: {}", !added),
            )
            .await;
            Ok(format!("{principal} {} {role} on group {group}\n", if added { "now holds" } else { "already held" }))
        }
        GroupCommand::Unassign { group, principal, role } => {
            let removed = store.credentials.unassign_group_role(&principal, &group, &role).await?;
            if !removed {
                bail!(
                    "{principal} does not hold {role} on group {group} (`toolgate group show {group}` lists the roles)"
                );
            }
            audit(store, "console.group_role_unassign", &group, format!("{principal} no longer holds {role}")).await;
            Ok(format!("{principal} no longer holds {role} on group {group}\n"))
        }
    }
}

fn known_role(role: &str) -> Result<()> {
    if !CATALOGUE.role_names().any(|known| known == role) {
        bail!("no role `{role}` in policy.yaml; {}", toolgate_policy::did_you_mean(role, CATALOGUE.role_names()));
    }
    Ok(())
}

async fn audit(store: &Repositories, action: &str, group: &str, detail: String) {
    let event = AuditEvent::new(Clock::default().now_ms(), action, AuditOutcome::Success)
        .by_principal(CONSOLE)
        .target(TargetType::ManagementGroup, group.to_string())
        .detail(detail);
    if let Err(err) = store.audit.append([event].into(), true).await {
        eprintln!("warning: the audit row could not be written ({err})");
    }
}

async fn list(store: &Repositories) -> Result<String> {
    let mut out = format!("{:<12} {:<28} {:<12} rule\n", "id", "name", "parent");
    for g in store.groups.management_groups().await? {
        let rule = g.rule.as_deref().unwrap_or("");
        let parent = g.parent_id.as_deref().unwrap_or("");
        out.push_str(&format!("{:<12} {:<28} {parent:<12} {rule}\n", g.id, escape_controls(&g.name)));
    }
    Ok(out)
}

async fn show(store: &Repositories, id: &str) -> Result<String> {
    let Some(group) = store.groups.management_group(id).await? else {
        bail!("no group `{id}` (`toolgate group list` lists them)");
    };
    let mut out = format!("{} {}\n", group.id, group.summary());
    if group.is_root() {
        out.push_str("members: every enrolled agent\n");
    } else {
        let members = store.groups.members(id).await??;
        out.push_str(&format!("members ({}):\n", members.len()));
        for m in members {
            let how = match (m.explicit, m.by_rule) {
                (true, true) => "explicit, rule",
                (true, false) => "explicit",
                _ => "rule",
            };
            out.push_str(&format!("  {} ({how})\n", m.agent_id));
        }
    }
    let roles = store.groups.group_roles(Some(id)).await?;
    out.push_str(&format!("roles ({}):\n", roles.len()));
    for r in roles {
        out.push_str(&format!("  {} holds {} (by {})\n", r.principal, r.role, r.granted_by));
    }
    Ok(out)
}

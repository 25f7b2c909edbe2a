//! The deciding checks a tool may declare instead of (or beside) the permission check
//! (tools.yaml `authorization`): a durable administrator role read fresh from the store, and
//! the owner role on the group a call names.

use std::sync::Arc;

use serde_json::Value;
use toolgate_domain::catalogue::{Catalogue, Precondition, ToolMeta};
use toolgate_domain::denial::Denial;
use toolgate_domain::engines::PrincipalKind;
use toolgate_domain::fleet::wire::QuarantineMode;
use toolgate_domain::groups::{ROOT_GROUP, Reach, at_or_below};
use toolgate_domain::tokens::{Authentication, RotationResolution};
use toolgate_domain::{Caller, Clock, StoreError};
use toolgate_store::{CredentialStore, GroupStore, WorkStore};

/// The store the checks read.
pub struct Deciders {
    pub catalogue: &'static Catalogue,
    /// Read directly: a principal's standing authority is never taken from a cache.
    pub credentials: Arc<dyn CredentialStore>,
    pub groups: Arc<dyn GroupStore>,
    /// How agents said they hold a quarantine.
    pub work: Arc<dyn WorkStore>,
}

fn store_fault(error: StoreError) -> Denial {
    Denial::StoreFault { what: "the deciding check", error }
}

impl Deciders {
    /// The caller holds policy.yaml `server.rbac_administrator_role` fleet-wide, as the store
    /// says now (not as the session's credential said when it was cached).
    pub async fn durable_administrator(&self, caller: &Caller, tool: &'static ToolMeta) -> Result<(), Denial> {
        let Some(role) = self.catalogue.rbac_administrator_role else {
            let requirement =
                "an administrator role, and policy.yaml names none (server.rbac_administrator_role)".into();
            return Err(Denial::RoleRequired { tool: tool.name, requirement });
        };
        let principal = self.credentials.principal(&caller.principal.name).await.map_err(store_fault)?;
        if principal.is_some_and(|p| p.roles.iter().any(|r| r == role)) {
            return Ok(());
        }
        Err(Denial::RoleRequired {
            tool: tool.name,
            requirement: format!("the fleet-wide role {role} (read afresh from the store)"),
        })
    }

    /// The caller holds policy.yaml `server.group_owner_role` on the group `group_id` names,
    /// or on one of its ancestors.
    pub async fn group_owner(&self, caller: &Caller, tool: &'static ToolMeta, arguments: &Value) -> Result<(), Denial> {
        let group_id = arguments.get("group_id").and_then(Value::as_str).unwrap_or_default();
        let Some(owner) = self.catalogue.group_owner_role else {
            let requirement = "a group owner role, and policy.yaml names none (server.group_owner_role)".into();
            return Err(Denial::RoleRequired { tool: tool.name, requirement });
        };
        let owned: Vec<&str> = caller
            .principal
            .group_roles
            .iter()
            .filter(|held| held.role == owner)
            .map(|held| held.group_id.as_str())
            .collect();
        if !owned.is_empty() {
            let groups = self.groups.management_groups().await.map_err(store_fault)?;
            if at_or_below(&groups, group_id, &owned) {
                return Ok(());
            }
        }
        let requirement = match group_id {
            ROOT_GROUP => format!("a fleet-wide grant of {}", tool.pair()),
            _ => format!(
                "a fleet-wide grant of {}, or the role {owner} on group `{group_id}` or one above it",
                tool.pair()
            ),
        };
        Err(Denial::RoleRequired { tool: tool.name, requirement })
    }

    /// The tool's precondition against the live state (tools.yaml `precondition`), before any
    /// ticket is minted or consumed. `recall`: the call names a ticket (kept either way).
    pub async fn precondition(
        &self,
        precondition: Precondition,
        tool: &'static ToolMeta,
        arguments: &Value,
        recall: bool,
        clock: &Clock,
        reach: &Reach,
    ) -> Result<(), Denial> {
        let text = |key: &str| arguments.get(key).and_then(Value::as_str).unwrap_or_default();
        let refuse = |reason: String| Err(Denial::Precondition { tool: tool.name, reason, recall });
        match precondition {
            Precondition::PendingRotation => {
                let (principal, successor, now) = (text("principal_id"), text("token_id"), clock.now_secs());
                let rotation = self.credentials.rotation(successor).await.map_err(store_fault)?;
                let Some(rotation) = rotation.filter(|r| r.principal == principal) else {
                    return refuse(format!(
                        "{principal} has no rotation to `{successor}`: token_id must be the successor_id its rotation returned"
                    ));
                };
                match rotation.resolution {
                    Some(RotationResolution::Confirmed) => {
                        return refuse(format!(
                            "the rotation of {principal} to {successor} was already confirmed (at {}): nothing is left to do",
                            rotation.resolved_at.unwrap_or_default()
                        ));
                    }
                    _ if !rotation.is_pending(now) => {
                        let how = match rotation.predecessor_revoked_at {
                            Some(at) => format!("{} was revoked at {at}", rotation.predecessor_id),
                            None => format!(
                                "its overlap ended at {} and {} expired",
                                rotation.overlap_ends_at, rotation.predecessor_id
                            ),
                        };
                        return refuse(format!(
                            "the rotation of {principal} to {successor} is no longer pending: {how}"
                        ));
                    }
                    _ => {}
                }
                let secret = text("secret");
                match self.credentials.authenticate(secret, now).await.map_err(store_fault)? {
                    Authentication::Valid { token, .. } if token.id == successor => Ok(()),
                    _ => refuse(format!("`secret` is not the secret of {successor}")),
                }
            }
            Precondition::QuarantineEnforceable => {
                if arguments.get("mode").and_then(Value::as_str) == Some(QuarantineMode::Soft.as_str()) {
                    return Ok(());
                }
                let agent_id = text("agent_id");
                // One the caller may not see reads as one that does not exist.
                match self.work.quarantine_enforcement(agent_id, reach).await.map_err(store_fault)? {
                    None => refuse(format!("no agent `{agent_id}` among those you may see; list_agents lists them")),
                    Some(Some(how)) if how.mode == QuarantineMode::Network => Ok(()),
                    Some(Some(how)) => refuse(format!(
                        "agent `{agent_id}` cannot cut its network ({}); call again with `mode: soft` to quarantine it anyway, or restart its agent as root with --allow-network-isolation",
                        how.why
                    )),
                    Some(None) => refuse(format!(
                        "agent `{agent_id}` has not said whether it can cut its network (an older agent, or not connected since it was upgraded); call again with `mode: soft` to quarantine it anyway"
                    )),
                }
            }
            Precondition::PersonOwner => {
                let owner = text("owner_username");
                match self.credentials.principal(owner).await.map_err(store_fault)? {
                    Some(found) if found.kind == PrincipalKind::Person => Ok(()),
                    Some(_) => refuse(format!(
                        "`{owner}` is an engine principal: an engine is owned by a person who answers for it"
                    )),
                    None => refuse(format!(
                        "there is no principal `{owner}`: name an existing person (toolgate principal add creates one)"
                    )),
                }
            }
        }
    }
}

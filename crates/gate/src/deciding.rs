//! The deciding checks a tool may declare instead of (or beside) the permission check
//! (tools.yaml `authorization`): a durable administrator role read fresh from the store, and
//! the owner role on the group a call names.

use std::sync::Arc;

use serde_json::Value;
use toolgate_domain::catalogue::{Catalogue, ToolMeta};
use toolgate_domain::denial::Denial;
use toolgate_domain::groups::{ROOT_GROUP, at_or_below};
use toolgate_domain::{Caller, StoreError};
use toolgate_store::{CredentialStore, GroupStore};

/// The store the checks read.
pub struct Deciders {
    pub catalogue: &'static Catalogue,
    /// Read directly: a principal's standing authority is never taken from a cache.
    pub credentials: Arc<dyn CredentialStore>,
    pub groups: Arc<dyn GroupStore>,
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
}

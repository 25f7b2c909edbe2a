//! What the caller may do, answered from the generated policy tables.

use serde_json::json;
use toolgate_domain::{ToolOutput, ToolResult};
use toolgate_policy::Decision;

use crate::args;
use crate::services::ToolContext;

pub async fn discover_permissions(ctx: &ToolContext, _args: args::DiscoverPermissions) -> ToolResult {
    let catalogue = ctx.services().catalogue();
    let caller = ctx.caller();
    let tools: Vec<_> = catalogue
        .tools
        .iter()
        .filter_map(|meta| {
            let decision = catalogue.decision(meta, caller.tier);
            let granted = catalogue.permits(&caller.principal.roles, meta.securable, meta.operation);
            (decision != Decision::Deny).then(|| {
                json!({
                    "tool": meta.name,
                    "permission": meta.pair(),
                    "tier_decision": decision.label(),
                    "rbac_granted": granted,
                    "callable": granted,
                })
            })
        })
        .collect();
    let roles: Vec<_> = catalogue
        .roles
        .iter()
        .filter(|r| caller.principal.roles.iter().any(|mine| mine == r.name))
        .map(|r| json!({ "role": r.name, "grants": r.grants.iter().map(|p| p.text()).collect::<Vec<_>>() }))
        .collect();
    Ok(ToolOutput::Structured(json!({
        "principal": caller.principal.name,
        "tier": caller.tier.map(|t| t.name),
        "roles": roles,
        "tools": tools,
    })))
}

//! What the caller may do, answered from the generated policy tables.

use serde_json::json;

use crate::gate::{rbac, tier};
use crate::registry::{ROLES, ToolId, args};
use crate::tool::{ToolContext, ToolOutput, ToolResult};

pub async fn discover_permissions(ctx: &ToolContext, _args: args::DiscoverPermissions) -> ToolResult {
    let tools: Vec<_> = ToolId::ALL
        .iter()
        .map(|&id| {
            let meta = id.meta();
            let decision = tier::decision_for_tool(ctx.tier, id);
            let granted = rbac::permits(&ctx.principal.roles, meta.securable, meta.operation);
            json!({
                "tool": meta.name,
                "permission": format!("{}:{}", meta.securable, meta.operation),
                "tier_decision": decision.label(),
                "rbac_granted": granted,
                "callable": decision != crate::catalogue::Decision::Deny && granted,
            })
        })
        .filter(|t| t["tier_decision"] != "deny")
        .collect();
    let roles: Vec<_> = ROLES
        .iter()
        .filter(|r| ctx.principal.roles.iter().any(|mine| mine == r.name))
        .map(|r| json!({ "role": r.name, "grants": r.grants.iter().map(|p| p.text()).collect::<Vec<_>>() }))
        .collect();
    Ok(ToolOutput::Structured(json!({
        "principal": ctx.principal.name,
        "tier": ctx.tier.map(|t| t.name()),
        "roles": roles,
        "tools": tools,
    })))
}

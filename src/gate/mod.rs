//! The gate every tools/call passes before its handler runs: tier (the generated matrix),
//! then RBAC (the principal's roles). Every refusal says what to do next.

pub mod rbac;
pub mod tier;

use crate::catalogue::Decision;
use crate::registry::{Tier, ToolId};
use crate::server::jsonrpc::{APPROVAL_REQUIRED, PERMISSION_DENIED, TIER_DENIED};

/// A refused call: its JSON-RPC code, message and the next step for the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub code: i64,
    pub message: String,
    pub remediation: String,
    pub retry_after_ms: Option<u64>,
}

/// Tier first, always; then RBAC. `Ok` carries the tier decision (Allow or ApprovalRequired).
pub fn authorize(tier: Option<Tier>, roles: &[String], tool: ToolId) -> Result<Decision, Refusal> {
    let meta = tool.meta();
    let pair = format!("{}:{}", meta.securable, meta.operation);
    let decision = tier::decision_for_tool(tier, tool);
    if decision == Decision::Deny {
        let allowed_in: Vec<&str> = Tier::ALL
            .iter()
            .filter(|t| tier::decision_for_tool(Some(**t), tool) != Decision::Deny)
            .map(|t| t.name())
            .collect();
        return Err(Refusal {
            code: TIER_DENIED,
            message: format!("tier `{}` may not call {} ({pair})", tier.map_or("(none)", |t| t.name()), meta.name),
            remediation: format!("use a token of a tier that allows {pair}: {}", allowed_in.join(", ")),
            retry_after_ms: None,
        });
    }
    if !rbac::permits(roles, meta.securable, meta.operation) {
        return Err(Refusal {
            code: PERMISSION_DENIED,
            message: format!("the caller's roles do not grant {pair}"),
            remediation: format!(
                "ask an administrator for a role that grants {pair} (`toolgate explain {}` lists them)",
                meta.name
            ),
            retry_after_ms: None,
        });
    }
    Ok(decision)
}

/// Approval-gated calls are refused until the approval flow (ticket, then recall) is in place.
pub fn approval_unavailable(tool: ToolId) -> Refusal {
    Refusal {
        code: APPROVAL_REQUIRED,
        message: format!("{} needs a human's approval at this tier", tool.meta().name),
        remediation: "this server cannot take approvals yet; use a tier that allows the call without approval".into(),
        retry_after_ms: None,
    }
}

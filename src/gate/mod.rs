//! The gate every tools/call passes before its handler runs: kill switches, tier (the
//! generated matrix), RBAC (the principal's roles), then human approval. Every refusal says
//! what to do next.

pub mod approval;
pub mod rbac;
pub mod tier;

use serde_json::Value;

use crate::catalogue::Decision;
use crate::registry::{Tier, ToolId};
use crate::server::jsonrpc::{PERMISSION_DENIED, TIER_DENIED};

pub use toolgate_policy::APPROVAL_ID;

/// Retrying an approval-required call helps once a human had time to decide.
pub const RETRY_AFTER_APPROVAL_MS: u64 = 30_000;
/// Retrying after a transient store fault.
pub const RETRY_AFTER_STORE_FAULT_MS: u64 = 5_000;

/// A refused call: its JSON-RPC code, message and the next step for the caller.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    pub code: i64,
    pub message: String,
    pub remediation: String,
    /// `None` when retrying cannot help.
    pub retry_after_ms: Option<u64>,
    /// Fields added to `error.data` (e.g. `approval_id`).
    pub data: Option<Value>,
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
            data: None,
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
            data: None,
        });
    }
    Ok(decision)
}

/// `--read-only`: only read-class tools run, whatever the tier.
pub fn read_only_mode(tool: &str) -> Refusal {
    Refusal {
        code: TIER_DENIED,
        message: format!("the server is in read-only mode: {tool} changes state"),
        remediation: "only read-class tools run while the server is read-only; ask its operator".into(),
        retry_after_ms: None,
        data: None,
    }
}

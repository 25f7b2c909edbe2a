//! Human approval for approval-gated calls: the first call mints a ticket (-32006 with its
//! id); a person approves it outside MCP; the same call with `approval_id` redeems it once.

use serde_json::{Value, json};

use super::{RETRY_AFTER_APPROVAL_MS, Refusal};
use crate::registry::ToolId;
use crate::server::AppState;
use crate::server::jsonrpc::{APPROVAL_REQUIRED, INTERNAL_ERROR, PERMISSION_DENIED};
use crate::store::{Approval, Mint, Recall, StoreError};

/// The refusal for the client, and what the audit row should say (it may say more).
pub struct ApprovalRefusal {
    pub refusal: Refusal,
    pub audit_detail: String,
}

/// Compact JSON with sorted keys (serde_json's map is ordered), without `approval_id`.
pub fn canonical_arguments(arguments: &Value) -> String {
    let mut a = arguments.clone();
    if let Some(obj) = a.as_object_mut() {
        obj.remove(super::APPROVAL_ID);
    }
    serde_json::to_string(&a).expect("JSON values serialize")
}

fn refused(
    code: i64,
    message: String,
    remediation: String,
    retry: Option<u64>,
    data: Option<Value>,
    audit: String,
) -> ApprovalRefusal {
    ApprovalRefusal {
        refusal: Refusal { code, message, remediation, retry_after_ms: retry, data },
        audit_detail: audit,
    }
}

fn pending(a: &Approval, minted: bool) -> ApprovalRefusal {
    refused(
        APPROVAL_REQUIRED,
        format!("{} needs a human's approval; approval {} is pending", a.tool, a.id),
        format!(
            "ask a reviewer to approve {} (toolgate approvals approve {} --as <reviewer>), then call again with the same arguments plus \"approval_id\": \"{}\"",
            a.id, a.id, a.id
        ),
        Some(RETRY_AFTER_APPROVAL_MS),
        Some(json!({"approval_id": a.id, "status_url": format!("/api/v1/approvals/{}", a.id)})),
        format!("approval {} {}", a.id, if minted { "minted" } else { "pending" }),
    )
}

fn store_fault(e: StoreError) -> ApprovalRefusal {
    refused(
        INTERNAL_ERROR,
        format!("the approval store failed: {e}"),
        "retry in a few seconds".into(),
        Some(super::RETRY_AFTER_STORE_FAULT_MS),
        None,
        format!("store fault: {e}"),
    )
}

/// The ticket-then-recall flow. `Ok` is the consumed approval: run the tool once.
pub fn check(
    state: &AppState,
    caller: &str,
    tool: ToolId,
    arguments: &Value,
    approval_id: Option<&str>,
) -> Result<Approval, ApprovalRefusal> {
    let name = tool.meta().name;
    let canonical = canonical_arguments(arguments);
    let now = state.clock.now_secs();
    let Some(approval_id) = approval_id else {
        return Err(match state.store.mint_approval(name, caller, &canonical, now).map_err(store_fault)? {
            Mint::Pending(a) => pending(&a, true),
            Mint::TooManyForSubmitter => refused(
                PERMISSION_DENIED,
                "you have 25 approvals pending, the most one principal may have".into(),
                "wait for reviewers to decide some of them (list_pending_approvals shows them)".into(),
                Some(RETRY_AFTER_APPROVAL_MS),
                None,
                "refused: submitter's pending cap".into(),
            ),
            Mint::TooManyInAll => refused(
                PERMISSION_DENIED,
                "1,000 approvals are pending server-wide, the most it keeps".into(),
                "wait for reviewers to work through the queue".into(),
                Some(RETRY_AFTER_APPROVAL_MS),
                None,
                "refused: global pending cap".into(),
            ),
        });
    };
    let denied = |message: &str, remediation: &str, audit: String| {
        Err(refused(PERMISSION_DENIED, message.into(), remediation.into(), None, None, audit))
    };
    // A replay, a concurrent loser and another principal's ticket all read alike.
    const NOT_REDEEMABLE: &str = "this approval cannot be redeemed: it was already used, or it is not yours";
    match state.store.recall_approval(approval_id, name, caller, &canonical, now).map_err(store_fault)? {
        Recall::Run(a) => Ok(a),
        Recall::StillPending(a) => Err(pending(&a, false)),
        Recall::Unknown => denied(
            "no such approval",
            "call without approval_id to request one",
            format!("unknown approval {approval_id}"),
        ),
        Recall::Mismatch => denied(
            "the approval does not match this call: it was granted for another tool or other arguments",
            "call with exactly the tool and arguments that were approved, or request a new approval",
            format!("approval {approval_id} does not match"),
        ),
        Recall::NotRedeemable { why } => denied(
            NOT_REDEEMABLE,
            "request a new approval by calling without approval_id",
            format!("approval {approval_id}: {why}"),
        ),
        Recall::Rejected => denied(
            "the approval was rejected",
            "ask the reviewer why, or request a new approval",
            format!("approval {approval_id} rejected"),
        ),
        Recall::Expired => denied(
            "the approval expired (7 days)",
            "request a new approval by calling without approval_id",
            format!("approval {approval_id} expired"),
        ),
    }
}

//! Human approval for approval-gated calls: the first call mints a ticket (a pending denial
//! carrying its id); a person approves it outside MCP; the same call with `approval_id`
//! redeems it, once.

use serde_json::Value;
use toolgate_domain::Clock;
use toolgate_domain::approvals::{Approval, ApprovalStatus, ArgumentBinding, Mint, Recall};
use toolgate_domain::catalogue::ToolMeta;
use toolgate_domain::denial::{ApprovalCap, Denial, RecallRefusal};
use toolgate_store::ApprovalStore;

/// `Ok` is the consumed approval: run the tool once.
pub async fn ticket_or_recall(
    store: &dyn ApprovalStore,
    clock: &Clock,
    surface: &str,
    caller: &str,
    tool: &ToolMeta,
    arguments: &Value,
    approval_id: Option<&str>,
) -> Result<Box<Approval>, Denial> {
    let binding = ArgumentBinding::of(arguments, tool.sensitive_arguments);
    let now = clock.now_secs();
    let fault = |error| Denial::StoreFault { what: "approval", error };
    let Some(approval_id) = approval_id else {
        return Err(match store.mint(surface, tool.name, caller, &binding, now).await.map_err(fault)? {
            Mint::Pending(approval) => Denial::ApprovalPending { approval, minted: true },
            Mint::TooManyForSubmitter => Denial::ApprovalCap(ApprovalCap::Submitter),
            Mint::TooManyInAll => Denial::ApprovalCap(ApprovalCap::Server),
        });
    };
    let refused = |why| Err(Denial::NotRedeemable { approval_id: approval_id.to_string(), why });
    match store.recall(surface, approval_id, tool.name, caller, &binding, now).await.map_err(fault)? {
        Recall::Run(approval) => Ok(approval),
        Recall::StillPending(approval) => Err(Denial::ApprovalPending { approval, minted: false }),
        Recall::Unknown => refused(RecallRefusal::Unknown),
        Recall::Mismatch => refused(RecallRefusal::Mismatch),
        Recall::NotRedeemable { why } => refused(RecallRefusal::Used { why }),
        Recall::Rejected => refused(RecallRefusal::Rejected),
        Recall::Expired => refused(RecallRefusal::Expired),
    }
}

/// Why the ticket `approval_id` can never be redeemed by `caller`'s call of `tool`, whatever
/// the live state: None while it still could be (pending, or approved and unconsumed). A
/// refusal on a recall says this rather than that the ticket "stays unconsumed".
pub async fn never_redeemable(
    store: &dyn ApprovalStore,
    clock: &Clock,
    caller: &str,
    tool: &ToolMeta,
    approval_id: &str,
) -> Result<Option<RecallRefusal>, Denial> {
    let fault = |error| Denial::StoreFault { what: "approval", error };
    let Some(ticket) = store.approval(approval_id).await.map_err(fault)? else {
        return Ok(Some(RecallRefusal::Unknown));
    };
    if ticket.submitter != caller || ticket.tool != tool.name {
        return Ok(Some(RecallRefusal::Used { why: "another principal's or another tool's" }));
    }
    Ok(match ticket.status {
        ApprovalStatus::Consumed => Some(RecallRefusal::Used { why: "consumed" }),
        ApprovalStatus::Rejected => Some(RecallRefusal::Rejected),
        ApprovalStatus::Pending | ApprovalStatus::Approved if ticket.expired(clock.now_secs()) => {
            Some(RecallRefusal::Expired)
        }
        ApprovalStatus::Pending | ApprovalStatus::Approved => None,
    })
}

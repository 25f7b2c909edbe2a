//! A person's decision on a ticket, audited. The approval API and the console's break-glass
//! path both decide through here, so both are audited alike.

use toolgate_domain::approvals::{Approval, Review, ReviewRefusal};
use toolgate_domain::audit::{AuditEvent, AuditOutcome, AuditSink};
use toolgate_domain::{Clock, StoreError};
use toolgate_store::ApprovalStore;

pub async fn review(
    store: &dyn ApprovalStore,
    audit: &dyn AuditSink,
    clock: &Clock,
    id: &str,
    reviewer: &str,
    approve: bool,
    comment: Option<&str>,
) -> Result<Result<Approval, ReviewRefusal>, StoreError> {
    let outcome = store.review(Review { id, reviewer, approve, comment, now: clock.now_secs() }).await?;
    let (result, detail) = match &outcome {
        Ok(a) => (
            if approve { AuditOutcome::Approved } else { AuditOutcome::Denied },
            format!("{} {} for {}", if approve { "approved" } else { "rejected" }, a.definition, a.submitter),
        ),
        Err(refusal) => (AuditOutcome::Failure, format!("review refused: {refusal}")),
    };
    audit.record(
        AuditEvent::new(clock.now_ms(), "approval.review", result).by_principal(reviewer).target(id).detail(detail),
    );
    Ok(outcome)
}

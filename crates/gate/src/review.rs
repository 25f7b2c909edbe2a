//! A person's decision on a ticket, audited. The approval API and the console's break-glass
//! path both decide through here, so both are audited alike.

use toolgate_domain::approvals::{Approval, Review, ReviewRefusal};
use toolgate_domain::audit::{AuditEvent, AuditOutcome, AuditSink, TargetType};
use toolgate_domain::{Clock, StoreError};
use toolgate_store::ApprovalStore;

/// A person's decision as asked: on which ticket, by whom, which way, why, and how the person
/// was authenticated (written into the audit row).
#[derive(Clone, Copy, Debug)]
pub struct Decide<'a> {
    pub id: &'a str,
    pub reviewer: &'a str,
    pub approve: bool,
    pub comment: Option<&'a str>,
    pub assurance: &'a str,
}

pub async fn review(
    store: &dyn ApprovalStore,
    audit: &dyn AuditSink,
    clock: &Clock,
    decide: Decide<'_>,
) -> Result<Result<Approval, ReviewRefusal>, StoreError> {
    let Decide { id, reviewer, approve, comment, assurance } = decide;
    let outcome = store.review(Review { id, reviewer, approve, comment, now: clock.now_secs() }).await?;
    let (result, detail) = match &outcome {
        Ok(a) => (
            if approve { AuditOutcome::Approved } else { AuditOutcome::Denied },
            format!(
                "{} {} for {}; assurance: {assurance}",
                if approve { "approved" } else { "rejected" },
                a.definition,
                a.submitter
            ),
        ),
        Err(refusal) => (AuditOutcome::Failure, format!("review refused: {refusal}; assurance: {assurance}")),
    };
    audit.record(
        AuditEvent::new(clock.now_ms(), "approval.review", result)
            .by_principal(reviewer)
            .target(TargetType::ApprovalTicket, id)
            .detail(detail),
    );
    Ok(outcome)
}

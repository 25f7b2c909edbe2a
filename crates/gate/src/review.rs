//! A person's decision on a ticket, audited. The approval API and the console's break-glass
//! path both decide through here, so both are audited alike, and both decide only the tickets
//! the reviewer's grant covers ([`Reviewing`]): another one reads as unknown.

use toolgate_domain::approvals::{Approval, Review, ReviewRefusal};
use toolgate_domain::audit::{AuditEvent, AuditOutcome, AuditSink, TargetType};
use toolgate_domain::{Clock, StoreError};
use toolgate_store::ApprovalStore;

use crate::Reviewing;

/// A person's decision as asked: on which ticket, by whom, which way, why, and how the person
/// was authenticated (written into the audit row).
#[derive(Clone, Copy)]
pub struct Decide<'a> {
    pub id: &'a str,
    pub reviewer: &'a Reviewing<'a>,
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
    let Decide { id, reviewer: reviewing, approve, comment, assurance } = decide;
    let reviewer = reviewing.name();
    let covered = match store.approval(id).await? {
        Some(ticket) => reviewing.covers(&ticket).await?,
        None => false,
    };
    let outcome = match covered {
        true => store.review(Review { id, reviewer, approve, comment, now: clock.now_secs() }).await?,
        false => Err(ReviewRefusal::Unknown(id.to_string())),
    };
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

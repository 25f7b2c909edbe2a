//! Open access review campaigns on the console, and a signed-in reviewer's decisions on their
//! grants, each with a TOTP proof no older than five minutes (the approvals' step-up). The
//! rules are the store's: never a grant of one's own, never on a closed campaign.

use std::sync::Arc;

use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::{Markup, html};
use toolgate_domain::audit::{AuditEvent, AuditOutcome, TargetType};
use toolgate_domain::reviews::{Decision, Grant, GrantKey, GrantType};
use toolgate_store::RecordDecision;

use super::{AppState, Fields, SignedIn, field, html as respond, now_ms, pages};
use crate::registry::CATALOGUE;

/// The tool whose pair decides who may attest (tools.yaml), held to the catalogue by a test.
pub const RECORD_ATTESTATION_HANDLER: &str = "reviews::record_attestation";

/// Why this person may not decide here: no fleet-wide grant of the attesting tool's pair (or
/// no such tool in this catalogue).
fn refusal(who: &SignedIn) -> Option<String> {
    let Some(tool) = CATALOGUE.tools.iter().find(|t| t.handler == RECORD_ATTESTATION_HANDLER) else {
        return Some("This server's catalogue has no access review tools.".into());
    };
    match CATALOGUE.permits(&who.1.roles, tool.securable, tool.operation) {
        true => None,
        false => Some(format!("Your fleet-wide roles do not grant {}: access reviews are for reviewers.", tool.pair())),
    }
}

fn grant_row(campaign: &str, g: &Grant, who: &SignedIn, fresh: bool) -> Markup {
    let k = &g.key;
    html! {
        tr {
            td {
                (k.principal_type.label())
                @if let Some(source) = &g.source { br; span.muted { "from " (source) ": changed at the identity provider" } }
            }
            td { code { (k.principal_id) } } td { (k.role_name) }
            td { (k.group_id) } td { (g.holder) }
            td.decision { (g.decision.map_or("undecided", Decision::label)) @if let Some(by) = &g.decided_by { br; span.muted { "by " (by) } } }
            td {
                @if g.holder == who.0.principal { span.muted { "yours: another reviewer decides it" } }
                @else {
                    form method="post" action={ "/console/reviews/" (campaign) "/attest" } {
                        input type="hidden" name="csrf" value=(who.0.csrf);
                        input type="hidden" name="principal_type" value=(k.principal_type.label());
                        input type="hidden" name="principal_id" value=(k.principal_id);
                        input type="hidden" name="role_name" value=(k.role_name);
                        input type="hidden" name="group_id" value=(k.group_id);
                        label { "Justification " input type="text" name="justification" required; }
                        (pages::step_up_code(fresh, who.0.idp.is_some()))
                        button type="submit" name="decision" value="attested" { "Attest" } " "
                        button type="submit" name="decision" value="flagged_revoke" { "Flag for revocation" }
                    }
                }
            }
        }
    }
}

async fn listing(
    state: &AppState,
    who: &SignedIn,
    error: Option<&str>,
    notice: Option<&str>,
    status: StatusCode,
) -> Response {
    let campaigns = match state.services.repositories().reviews.reviews().await {
        Ok(all) => all.into_iter().filter(|(c, _)| c.is_open()).collect::<Vec<_>>(),
        Err(e) => {
            return who.unavailable(e);
        }
    };
    let fresh = who.0.proof_fresh(now_ms(state));
    let body = html! {
        (pages::messages(error, notice))
        @if campaigns.is_empty() { p #no-reviews { "No access review is open (open_access_review opens one)." } }
        @for (c, grants) in &campaigns {
            h2 { (c.title) " " span.muted { code { (c.campaign_id) } ", opened by " (c.opened_by) " " (pages::when(c.opened_at)) } }
            table.review id={ "review-" (c.campaign_id) } {
                tr { th { "Type" } th { "Principal" } th { "Role" } th { "Group" } th { "Holder" } th { "Decision" } th {} }
                @for g in grants { (grant_row(&c.campaign_id, g, who, fresh)) }
            }
        }
    };
    respond(status, pages::layout("Access reviews", &who.chrome(), body))
}

pub async fn page(State(state): State<Arc<AppState>>, who: SignedIn) -> Response {
    if let Some(why) = refusal(&who) {
        return respond(StatusCode::FORBIDDEN, pages::refused("Not a reviewer", &why, &who.chrome()));
    }
    listing(&state, &who, None, None, StatusCode::OK).await
}

pub async fn attest(
    State(state): State<Arc<AppState>>,
    who: SignedIn,
    headers: HeaderMap,
    Path(campaign_id): Path<String>,
    Form(fields): Form<Fields>,
) -> Response {
    if let Some(refused) = who.csrf_refusal(&fields) {
        return refused;
    }
    if let Some(why) = refusal(&who) {
        return respond(StatusCode::FORBIDDEN, pages::refused("Not a reviewer", &why, &who.chrome()));
    }
    let (Some(principal_type), Some(decision)) =
        (GrantType::from_label(field(&fields, "principal_type")), Decision::from_label(field(&fields, "decision")))
    else {
        return listing(&state, &who, Some("Choose Attest or Flag for revocation."), None, StatusCode::BAD_REQUEST)
            .await;
    };
    let assurance = match who.step_up(&state, &headers, field(&fields, "code")).await {
        Ok(assurance) => assurance,
        Err(message) => return listing(&state, &who, Some(&message), None, StatusCode::UNAUTHORIZED).await,
    };
    let key = GrantKey {
        principal_type,
        principal_id: field(&fields, "principal_id").into(),
        role_name: field(&fields, "role_name").into(),
        group_id: field(&fields, "group_id").into(),
    };
    let justification = Some(field(&fields, "justification")).filter(|j| !j.is_empty());
    let now = state.services.clock().now_secs();
    let record = RecordDecision { campaign_id: &campaign_id, key, decision, justification, by: &who.0.principal, now };
    match state.services.repositories().reviews.record_decision(record).await {
        Ok(Ok((before, g))) => {
            let detail = format!(
                "{} {} {}: {} (was {}); assurance: {assurance}",
                g.key.principal_type.label(),
                g.key.principal_id,
                g.key.role_name,
                decision.label(),
                before.map_or("undecided", Decision::label)
            );
            let event = AuditEvent::new(now_ms(&state), "access_review.decision", AuditOutcome::Success)
                .by_principal(&who.0.principal)
                .target(TargetType::AccessReview, campaign_id.clone())
                .detail(detail)
                .correlation(state.mcp.correlation_id());
            state.services.audit().record_durable(event).await;
            let mut done = format!("Recorded {} on {} {}.", decision.label(), g.key.principal_id, g.key.role_name);
            if decision == Decision::FlaggedRevoke
                && let Some(remediation) = g.changed_elsewhere()
            {
                done.push_str(&format!(" {remediation}."));
            }
            let session = state.console.current(&headers, now_ms(&state)).unwrap_or_else(|| who.0.clone());
            let who = SignedIn(session, who.1);
            listing(&state, &who, None, Some(&done), StatusCode::OK).await
        }
        Ok(Err(refused)) => {
            listing(&state, &who, Some(&format!("Not recorded: {refused}.")), None, StatusCode::CONFLICT).await
        }
        Err(e) => {
            let message = format!("The store cannot answer ({e}); try again in a few seconds.");
            listing(&state, &who, Some(&message), None, StatusCode::SERVICE_UNAVAILABLE).await
        }
    }
}

#[cfg(test)]
mod tests {
    /// The page keys on a handler name: it must be the catalogue's.
    #[test]
    fn the_attesting_handler_is_in_the_catalogue() {
        assert!(super::CATALOGUE.tools.iter().any(|t| t.handler == super::RECORD_ATTESTATION_HANDLER));
    }
}

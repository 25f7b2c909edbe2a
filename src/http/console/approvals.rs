//! Pending approvals, and deciding them: on the console's page, and over REST for a signed-in
//! console session (`POST /api/v1/approvals/ID/approve|reject` with its cookie and its CSRF
//! token in `X-CSRF-Token`). Either way the decider is a reviewer who is not the submitter,
//! with a TOTP proof no older than five minutes, and the audit row names the assurance.

use std::sync::Arc;

use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::{Markup, html};
use serde_json::{Value, json};
use toolgate_domain::approvals::{Approval, ReviewRefusal};
use toolgate_gate::Decide;
use toolgate_policy::{Decision, Rules, evaluate};

use super::session::csrf_matches;
use super::{AppState, Fields, SignedIn, field, html as respond, now_ms, pages};
use crate::http::{ApiError, json_response};
use crate::registry::ToolId;

/// Why the ticket exists: each tier whose policy gates the tool on approval, and the rule.
fn rules_behind(tool: &str) -> Vec<String> {
    let Some(meta) = ToolId::from_name(tool).map(|t| t.meta()) else { return vec![] };
    crate::registry::CATALOGUE
        .tiers
        .iter()
        .filter_map(|tier| {
            let rules = Rules { allow: tier.allow, approval: tier.approval, confirm: tier.confirm };
            let verdict = evaluate(rules, meta.securable, meta.operation);
            let by = verdict.approval_by.filter(|_| verdict.decision == Decision::ApprovalRequired)?;
            Some(format!("tier `{}`: approval required by `{}` ({})", tier.name, tier.approval[by].text(), meta.pair()))
        })
        .collect()
}

fn pretty(canonical: &str) -> String {
    serde_json::from_str::<Value>(canonical)
        .and_then(|v| serde_json::to_string_pretty(&v))
        .unwrap_or_else(|_| canonical.into())
}

fn row(a: &Approval, who: &SignedIn, proof_fresh: bool, touches: Markup, plans: Option<(Markup, String)>) -> Markup {
    let title = ToolId::from_name(&a.tool).map_or(a.tool.as_str(), |t| t.meta().title);
    html! {
        tr id={ "approval-" (a.id) } {
            td { strong { (title) } br; code { (a.tool) } }
            td.submitter { (a.submitter) }
            td { (pages::when(a.submitted_at)) br; span.muted { "expires " (pages::when(a.expires_at)) } }
            td { pre { (pretty(&a.canonical_args)) } }
            td.touches {
                (touches)
                @if let Some((plans, _)) = &plans { (plans) }
                @if let Some(declared) = super::plans::bundle_declarations(a) { (declared) }
            }
            td { @for rule in rules_behind(&a.tool) { div.muted { (rule) } } }
            td {
                form method="post" action={ "/console/approvals/" (a.id) "/decide" } {
                    input type="hidden" name="csrf" value=(who.0.csrf);
                    @if let Some((_, digest)) = &plans { input type="hidden" name="plans" value=(digest); }
                    label { "Reason " input type="text" name="reason" required; }
                    (pages::step_up_code(proof_fresh, who.0.idp.is_some()))
                    button type="submit" name="decision" value="approve" { "Approve" } " "
                    button type="submit" name="decision" value="reject" { "Reject" }
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
    let services = &state.services;
    let read = async {
        let reviewing = services.reviewing(&who.1).await?;
        let pending = reviewing.tickets(services.approvals(), Some("pending"), None, 500).await?;
        Ok::<_, toolgate_domain::StoreError>((reviewing, pending))
    };
    let (reviewing, pending) = match read.await {
        Ok(read) => read,
        Err(e) => {
            return who.unavailable(e);
        }
    };
    let fresh = who.0.proof_fresh(now_ms(state));
    let mut rows = Vec::with_capacity(pending.len());
    for a in &pending {
        let plans = super::plans::of_ticket(services, &reviewing, &a.id).await;
        rows.push(row(a, who, fresh, super::touches::cell(services, &reviewing, a).await, plans));
    }
    let body = html! {
        (pages::messages(error, notice))
        p.muted {
            "Arguments marked sensitive in the catalogue are shown redacted. "
            @if fresh { "Your last code is recent: a decision needs no new one for a few minutes." }
            @else { "A decision needs a fresh code from your authenticator app." }
        }
        @if pending.is_empty() { p #none { "Nothing is waiting for a decision." } }
        @else {
            table #pending {
                tr { th { "Tool" } th { "Submitter" } th { "Asked" } th { "Arguments" } th { "What it would touch" } th { "Why it needs a person" } th { "Decision" } }
                @for r in rows { (r) }
            }
        }
    };
    respond(status, pages::layout("Approvals", &who.chrome(), body))
}

pub async fn page(State(state): State<Arc<AppState>>, who: SignedIn) -> Response {
    if let Some(refused) = who.reviewer_refusal(&state) {
        return refused;
    }
    listing(&state, &who, None, None, StatusCode::OK).await
}

/// Why a decision was not made.
enum NotDecided {
    Store(toolgate_domain::StoreError),
    /// The status, and what to tell the person.
    Refused(StatusCode, String),
}

/// One decision, after the checks common to both routes.
/// What a person decided, as their form or REST body said it.
struct Asked<'a> {
    id: &'a str,
    approve: bool,
    reason: &'a str,
    code: &'a str,
    /// The digest of the plans the page showed (none from a REST body that names none).
    plans_shown: Option<&'a str>,
}

async fn decide_as(
    state: &AppState,
    who: &SignedIn,
    headers: &HeaderMap,
    asked: Asked<'_>,
) -> Result<(Approval, String), NotDecided> {
    let Asked { id, approve, reason, code, plans_shown } = asked;
    use NotDecided::Refused;
    let assurance = who.step_up(state, headers, code).await.map_err(|m| Refused(StatusCode::UNAUTHORIZED, m))?;
    let services = &state.services;
    let reviewing = services.reviewing(&who.1).await.map_err(NotDecided::Store)?;
    if approve {
        // Bound first, as the reviewer may read them: an approval whose plans cannot be bound
        // is not made.
        let online = crate::plans::online_in(services.fleet());
        let reader = reviewing.reader();
        match crate::plans::bind(services.repositories(), id, plans_shown, reader.as_ref(), &online).await {
            Ok(()) => {}
            Err(crate::plans::BindRefusal::Store(e)) => return Err(NotDecided::Store(e)),
            Err(refusal) => return Err(Refused(StatusCode::CONFLICT, format!("Not approved: {refusal}."))),
        }
    }
    let reason = Some(reason).filter(|r| !r.is_empty());
    let decide = Decide { id, reviewer: &reviewing, approve, comment: reason, assurance: &assurance };
    let decided = toolgate_gate::review(services.approvals(), services.audit(), services.clock(), decide)
        .await
        .map_err(NotDecided::Store)?;
    match decided {
        Ok(a) => {
            let event =
                if approve { crate::metrics::ApprovalEvent::Approved } else { crate::metrics::ApprovalEvent::Rejected };
            crate::metrics::approval(event, &a.tool);
            Ok((a, assurance))
        }
        Err(ReviewRefusal::OwnRequest(_)) => {
            Err(Refused(StatusCode::FORBIDDEN, "You submitted this request: another person must decide it.".into()))
        }
        Err(ReviewRefusal::Unknown(_)) => Err(Refused(StatusCode::NOT_FOUND, format!("There is no approval `{id}`."))),
        Err(other) => Err(Refused(StatusCode::CONFLICT, format!("Not decided: {other}."))),
    }
}

pub async fn decide(
    State(state): State<Arc<AppState>>,
    who: SignedIn,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(fields): Form<Fields>,
) -> Response {
    if let Some(refused) = who.csrf_refusal(&fields) {
        return refused;
    }
    if let Some(refused) = who.reviewer_refusal(&state) {
        return refused;
    }
    let approve = match field(&fields, "decision") {
        "approve" => true,
        "reject" => false,
        _ => return listing(&state, &who, Some("Choose Approve or Reject."), None, StatusCode::BAD_REQUEST).await,
    };
    let plans = Some(field(&fields, "plans")).filter(|p| !p.is_empty());
    let asked =
        Asked { id: &id, approve, reason: field(&fields, "reason"), code: field(&fields, "code"), plans_shown: plans };
    match decide_as(&state, &who, &headers, asked).await {
        Ok((a, assurance)) => {
            let done = match approve {
                true => format!(
                    "Approved {} for {}: they may now call it again with approval_id {}. Proof: {assurance}.",
                    a.tool, a.submitter, a.id
                ),
                false => format!("Rejected {} for {}. Proof: {assurance}.", a.tool, a.submitter),
            };
            // The session's proof time may have moved (a fresh code): show the page as it is now.
            let session = state.console.current(&headers, now_ms(&state)).unwrap_or_else(|| who.0.clone());
            let who = SignedIn(session, who.1);
            listing(&state, &who, None, Some(&done), StatusCode::OK).await
        }
        Err(NotDecided::Refused(status, message)) => listing(&state, &who, Some(&message), None, status).await,
        Err(NotDecided::Store(e)) => {
            let message = format!("The store cannot answer ({e}); try again in a few seconds.");
            listing(&state, &who, Some(&message), None, StatusCode::SERVICE_UNAVAILABLE).await
        }
    }
}

/// `POST /api/v1/approvals/ID/approve|reject` for a signed-in console session: the cookie,
/// `X-CSRF-Token`, and a JSON body `{"comment": …, "code": …}` (the code when the session's
/// last proof is older than five minutes). A bearer token, of any kind, is refused.
pub async fn rest_decide(
    state: &AppState,
    headers: &HeaderMap,
    id: &str,
    approve: bool,
    body: &[u8],
) -> Result<Response, ApiError> {
    let Some(who) = SignedIn::load(state, headers).await? else {
        return Err(ApiError::forbidden(
            "console_session_required",
            "a decision needs a person signed in to the console with a second factor (/console); tokens can never decide",
        ));
    };
    if !who.0.enrolled() {
        return Err(ApiError::forbidden("factor_not_enrolled", "enroll a second factor on /console/enroll first"));
    }
    let token = headers.get("x-csrf-token").and_then(|v| v.to_str().ok());
    if !csrf_matches(&who.0.csrf, token) {
        return Err(ApiError::forbidden("csrf", "send the console session's CSRF token in X-CSRF-Token"));
    }
    if who.reviewer_refusal(state).is_some() {
        return Err(ApiError::forbidden(
            "not_a_reviewer",
            format!("your roles do not grant {}", state.services.catalogue().reviewer),
        ));
    }
    let body: Value = if body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request("bad_json", format!("the body is not JSON: {e}")))?
    };
    let text = |k: &str| body.get(k).and_then(Value::as_str).unwrap_or_default().trim().to_string();
    let plans = Some(text("plans")).filter(|p| !p.is_empty());
    let (reason, code) = (text("comment"), text("code"));
    let asked = Asked { id, approve, reason: &reason, code: &code, plans_shown: plans.as_deref() };
    match decide_as(state, &who, headers, asked).await {
        Ok((approval, _)) => Ok(json_response(StatusCode::OK, json!(approval).to_string())),
        Err(NotDecided::Refused(status, message)) => Err(ApiError::new(status, "refused", message)),
        Err(NotDecided::Store(e)) => Err(ApiError::store(e)),
    }
}

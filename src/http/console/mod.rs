//! The approver's console, `/console`: server-rendered pages where a person signs in with a
//! password and a TOTP factor and decides approvals; also their own API tokens, the audit log
//! and the fleet at a glance. Sessions are cookies (`HttpOnly`, `SameSite=Strict`, `Secure`
//! under TLS) with a CSRF token on every form; decisions and new credentials need a TOTP proof
//! no older than five minutes. An MCP or API token can never decide anything here.

mod approvals;
pub mod factor;
mod oidc;
mod pages;
mod plans;
mod reviews;
pub mod session;
mod sign_in;
mod tokens;
mod touches;
mod uploads;
mod views;

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use maud::Markup;
use toolgate_domain::audit::{AuditEvent, AuditOutcome, AuditSink};

pub use approvals::rest_decide;
pub use oidc::PendingSignIns;
pub use session::ConsoleSessions;
use session::{ConsoleSession, csrf_matches};
pub use sign_in::prove_code;

use super::AppState;

pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/console", get(|| async { Redirect::to("/console/approvals") }))
        .route("/console/", get(|| async { Redirect::to("/console/approvals") }))
        .route("/console/sign-in", get(sign_in::page).post(sign_in::submit))
        .route("/console/sign-out", post(sign_in::sign_out))
        .route("/console/enroll", get(sign_in::enroll_page).post(sign_in::enroll))
        .route("/console/oidc/start", get(oidc::start))
        .route(crate::oauth::console_client::CALLBACK_PATH, get(oidc::callback))
        .route("/console/approvals", get(approvals::page))
        .route("/console/approvals/{id}/decide", post(approvals::decide))
        .route("/console/reviews", get(reviews::page))
        .route("/console/reviews/{id}/attest", post(reviews::attest))
        .route("/console/tokens", get(tokens::page).post(tokens::create))
        .route("/console/tokens/{id}/revoke", post(tokens::revoke))
        .route("/console/audit", get(views::audit))
        .route("/console/fleet", get(views::fleet))
        .route("/console/uploads", get(uploads::page))
        .route("/console/uploads/{grant_id}/content", get(uploads::download))
}

/// A form's fields.
pub type Fields = HashMap<String, String>;

fn field<'a>(form: &'a Fields, name: &str) -> &'a str {
    form.get(name).map(String::as_str).unwrap_or_default().trim()
}

/// An HTML page, with the headers every console page carries: no caching, no framing, no
/// script, forms only to this origin.
pub fn html(status: StatusCode, page: Markup) -> Response {
    let mut response = (status, page.into_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'",
        ),
    );
    response
}

fn see_other(to: &str) -> Response {
    Redirect::to(to).into_response()
}

/// Whether the server speaks TLS: cookies are then `Secure`.
fn secure(state: &AppState) -> bool {
    state.config.tls.is_some()
}

fn now_ms(state: &AppState) -> i64 {
    state.services.clock().now_ms()
}

fn audit(state: &AppState, action: &str, outcome: AuditOutcome, principal: &str, detail: String) {
    let event = AuditEvent::new(now_ms(state), action, outcome)
        .by_principal(principal)
        .detail(detail)
        .correlation(state.mcp.correlation_id());
    state.services.audit().record(event);
}

/// A signed-in person whose factor is enrolled; anyone else is sent to sign in (or to enroll).
/// A principal removed since signing in is signed out.
/// The session and its principal's roles (fleet-wide and on groups), read once per request.
pub struct SignedIn(pub ConsoleSession, toolgate_domain::Principal);

impl FromRequestParts<Arc<AppState>> for SignedIn {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<AppState>) -> Result<Self, Response> {
        match SignedIn::load(state, &parts.headers).await {
            Ok(Some(who)) if who.0.enrolled() => Ok(who),
            Ok(Some(_)) => Err(see_other("/console/enroll")),
            Ok(None) => Err(see_other("/console/sign-in")),
            Err(e) => {
                let message = format!("The store cannot answer ({e}); try again shortly.");
                let chrome = pages::Chrome { principal: None, csrf: None, enrolled: false };
                Err(html(StatusCode::SERVICE_UNAVAILABLE, pages::refused("Unavailable", &message, &chrome)))
            }
        }
    }
}

impl SignedIn {
    /// The request's live session, enrolled or not, with its principal's roles now; None
    /// without one, or when the principal was removed since (its session is then closed).
    pub async fn load(state: &AppState, headers: &HeaderMap) -> Result<Option<Self>, toolgate_domain::StoreError> {
        let Some(session) = state.console.current(headers, now_ms(state)) else { return Ok(None) };
        match state.services.credentials().principal(&session.principal).await? {
            Some(record) => {
                let mut principal = record.principal();
                // A person signed in through the IdP also holds what their groups brought.
                if let Some(idp) = &session.idp {
                    principal.roles.extend(idp.roles.iter().filter(|r| !record.roles.contains(r)).cloned());
                    principal
                        .group_roles
                        .extend(idp.group_roles.iter().filter(|r| !record.group_roles.contains(r)).cloned());
                }
                Ok(Some(SignedIn(session, principal)))
            }
            None => {
                state.console.close(headers);
                Ok(None)
            }
        }
    }

    fn chrome(&self) -> pages::Chrome<'_> {
        pages::Chrome { principal: Some(&self.0.principal), csrf: Some(&self.0.csrf), enrolled: self.0.enrolled() }
    }

    /// The refusal page, unless the form's CSRF token is this session's.
    fn csrf_refusal(&self, form: &Fields) -> Option<Response> {
        match csrf_matches(&self.0.csrf, form.get("csrf").map(String::as_str)) {
            true => None,
            false => Some(html(
                StatusCode::FORBIDDEN,
                pages::refused(
                    "Refused",
                    "This form carried no valid CSRF token (it expired, or it was sent from another page): reload the page and submit again.",
                    &self.chrome(),
                ),
            )),
        }
    }

    /// The refusal page, unless the principal's roles grant reviewing (policy.yaml
    /// `server.reviewer_permission`), fleet-wide or on management groups.
    fn reviewer_refusal(&self, state: &AppState) -> Option<Response> {
        let catalogue = state.services.catalogue();
        match catalogue.review_reach(&self.1) {
            Some(_) => None,
            None => Some(self.refused(&format!(
                "Your roles (fleet-wide or on groups) do not grant {}: this page is for reviewers.",
                catalogue.reviewer
            ))),
        }
    }

    /// The refusal page, unless the principal's roles grant reviewing fleet-wide: the pages
    /// about the whole fleet are a fleet-wide reviewer's.
    fn fleet_reviewer_refusal(&self, state: &AppState) -> Option<Response> {
        let catalogue = state.services.catalogue();
        match catalogue.may_review(&self.1.roles) {
            true => None,
            false => Some(self.refused(&format!(
                "This page shows the whole fleet: it needs a fleet-wide grant of {}. The approvals page shows the tickets within your groups.",
                catalogue.reviewer
            ))),
        }
    }

    /// The page for a store that cannot answer now.
    fn unavailable(&self, error: impl std::fmt::Display) -> Response {
        html(StatusCode::SERVICE_UNAVAILABLE, pages::refused("Unavailable", &error.to_string(), &self.chrome()))
    }

    fn refused(&self, message: &str) -> Response {
        html(StatusCode::FORBIDDEN, pages::refused("Not a reviewer", message, &self.chrome()))
    }

    /// A fresh proof: the session's last one if it is recent enough, else `code` (taken once)
    /// for a local account; a person signed in through the IdP signs in there again
    /// ([`oidc`]). Err: what to tell the person.
    async fn step_up(&self, state: &AppState, headers: &HeaderMap, code: &str) -> Result<String, String> {
        let now = now_ms(state);
        let window = pages::minutes(self.0.step_up_ms);
        if self.0.proof_fresh(now) && code.is_empty() {
            return Ok(format!("{} (proof within {window})", self.0.assurance));
        }
        if self.0.idp.is_some() {
            return Err(format!(
                "Your last sign-in at your identity provider is more than {window} old: use \"Sign in again\" above, then decide."
            ));
        }
        if code.is_empty() {
            return Err(format!(
                "Your last code is more than {window} old: enter a fresh code from your authenticator app."
            ));
        }
        sign_in::prove_code(state, &self.0.principal, code, now).await?;
        state.console.proved(headers, now);
        Ok("password+totp (fresh code)".into())
    }
}

//! Signing in to the console through the organisation's identity provider, and an approval's
//! step-up there (docs/sign-in.md). `/console/oidc/start` sends the browser to the IdP with a
//! fresh `state`, `nonce` and PKCE verifier, kept here for ten minutes and bound to this browser
//! by a cookie; `/console/oidc/callback` takes each once. The IdP's redirect is a cross-site
//! request, which carries no `SameSite=Strict` cookie: the binding cookie is `Lax`, a step-up
//! names its session in what was kept, and the answer is a page that moves on by itself, so
//! that the next request is same-site again and carries the session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::html;
use toolgate_domain::audit::AuditOutcome;
use toolgate_domain::engines::PrincipalKind;
use toolgate_domain::secrets::{hash_secret, random_hex};

use super::session::{ConsoleSession, IdpSession, SESSION_COOKIE, cookie, session_key, set_cookie};
use super::{AppState, Fields, SignedIn, audit, html as page, now_ms, pages, secure, see_other};
use crate::oauth::resource::{Issuer, ResourceServer};

/// The cookie that binds a sign-in begun here to the browser that comes back.
const BINDING_COOKIE: &str = "toolgate_oidc";
/// How long a begun sign-in waits for the IdP's answer.
const PENDING_MS: i64 = 600_000;
/// Begun sign-ins kept at once; past it the oldest go.
const MAX_PENDING: usize = 10_000;

struct Pending {
    binding: String,
    verifier: String,
    nonce: String,
    begun_ms: i64,
    step_up: Option<StepUp>,
}

/// A step-up: the session it proves for, and the person who must sign in again.
struct StepUp {
    session_key: String,
    subject: String,
}

#[derive(Default)]
pub struct PendingSignIns {
    by_state: Mutex<HashMap<String, Pending>>,
}

impl PendingSignIns {
    fn put(&self, state: String, pending: Pending) {
        let mut map = self.by_state.lock().unwrap_or_else(|e| e.into_inner());
        let now = pending.begun_ms;
        map.retain(|_, p| now - p.begun_ms < PENDING_MS);
        if map.len() >= MAX_PENDING
            && let Some(oldest) = map.iter().min_by_key(|(_, p)| p.begun_ms).map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        map.insert(state, pending);
    }

    /// The sign-in `state` names, once, if it is still waiting.
    fn take(&self, state: &str, now_ms: i64) -> Option<Pending> {
        let pending = self.by_state.lock().unwrap_or_else(|e| e.into_inner()).remove(state)?;
        (now_ms - pending.begun_ms < PENDING_MS).then_some(pending)
    }
}

/// The console's IdP client and the issuer it signs in through, if the deployment has one.
fn console_client(state: &AppState) -> Option<(&ResourceServer, &Issuer)> {
    let server = state.oauth.as_ref()?;
    let (index, _) = server.console.as_ref()?;
    Some((server, &server.issuers[*index]))
}

fn refused(status: StatusCode, message: &str) -> Response {
    let chrome = pages::Chrome { principal: None, csrf: None, enrolled: false };
    let body = html! { (pages::messages(Some(message), None)) p { a href="/console/sign-in" { "Back to sign-in" } } };
    page(status, pages::layout("Sign-in refused", &chrome, body))
}

/// A page that moves on to `to` by itself (see the module's note on cookies).
fn move_on(to: &str, cookies: &[String]) -> Response {
    let chrome = pages::Chrome { principal: None, csrf: None, enrolled: false };
    let body = html! { p { "Signed in. " a #continue href=(to) { "Continue" } } };
    let mut response = page(StatusCode::OK, pages::layout("Signed in", &chrome, body));
    let refresh = format!("0;url={to}");
    if let Ok(value) = HeaderValue::from_str(&refresh) {
        response.headers_mut().insert(header::REFRESH, value);
    }
    for text in cookies {
        if let Ok(value) = HeaderValue::from_str(text) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

/// The binding cookie: `Lax`, so that the IdP's redirect back carries it; for these paths only.
fn binding_cookie(state: &AppState, value: &str, max_age_secs: i64) -> String {
    let mut text =
        format!("{BINDING_COOKIE}={value}; Path=/console/oidc; HttpOnly; SameSite=Lax; Max-Age={max_age_secs}");
    if secure(state) {
        text.push_str("; Secure");
    }
    text
}

pub async fn start(State(state): State<Arc<AppState>>, headers: HeaderMap, Query(query): Query<Fields>) -> Response {
    let Some((server, issuer)) = console_client(&state) else {
        return refused(
            StatusCode::NOT_FOUND,
            "This server signs nobody in through an identity provider (docs/sign-in.md).",
        );
    };
    let (_, client) = server.console.as_ref().expect("console_client found it");
    let step_up = match query.get("step_up").map(String::as_str) {
        Some("1") => match SignedIn::load(&state, &headers).await {
            Ok(Some(who)) => match (&who.0.idp, session_key(&headers)) {
                (Some(idp), Some(session_key)) => Some(StepUp { session_key, subject: idp.subject.clone() }),
                _ => {
                    return refused(
                        StatusCode::BAD_REQUEST,
                        "This session was not signed in through the identity provider: prove yourself with your authenticator's code.",
                    );
                }
            },
            Ok(None) => return see_other("/console/sign-in"),
            Err(e) => {
                return refused(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!("The store cannot answer ({e}); try again shortly."),
                );
            }
        },
        _ => None,
    };
    let begun = match client.begin(issuer, step_up.is_some()).await {
        Ok(begun) => begun,
        Err(why) => {
            return refused(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("The identity provider cannot be reached: {why}. Try again shortly."),
            );
        }
    };
    let binding = random_hex::<16>();
    let pending = Pending {
        binding: hash_secret(&binding),
        verifier: begun.verifier,
        nonce: begun.nonce,
        begun_ms: now_ms(&state),
        step_up,
    };
    state.idp_sign_ins.put(begun.state, pending);
    let mut response = see_other(&begun.url);
    if let Ok(value) = HeaderValue::from_str(&binding_cookie(&state, &binding, PENDING_MS / 1000)) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

pub async fn callback(State(state): State<Arc<AppState>>, headers: HeaderMap, Query(query): Query<Fields>) -> Response {
    let Some((server, issuer)) = console_client(&state) else {
        return refused(StatusCode::NOT_FOUND, "This server signs nobody in through an identity provider.");
    };
    let (_, client) = server.console.as_ref().expect("console_client found it");
    let now = now_ms(&state);
    let get = |key: &str| query.get(key).map(String::as_str).unwrap_or_default();
    let Some(pending) = state.idp_sign_ins.take(get("state"), now) else {
        return refused(StatusCode::BAD_REQUEST, "This sign-in expired or was used already: start again.");
    };
    let bound = cookie(&headers, BINDING_COOKIE).is_some_and(|value| hash_secret(&value) == pending.binding);
    if !bound {
        return denied(
            &state,
            Flow::SignIn,
            "foreign_browser",
            "-",
            "sign-in came back to another browser than the one that began it",
            "This sign-in was begun in another browser: start again here.",
        );
    }
    if !get("error").is_empty() {
        let why = format!("the identity provider refused: {} {}", get("error"), get("error_description"));
        return denied(
            &state,
            Flow::SignIn,
            "idp_refused",
            "-",
            &why,
            &format!("Your identity provider refused the sign-in: {} {}", get("error"), get("error_description")),
        );
    }
    // RFC 9207: when the IdP names itself, it must be the one asked.
    if !get("iss").is_empty() && get("iss") != issuer.settings.issuer {
        return denied(
            &state,
            Flow::SignIn,
            "issuer_mismatch",
            "-",
            "the answer names another issuer",
            "The answer came from another identity provider: start again.",
        );
    }
    let signed = match client.finish(issuer, get("code"), &pending.verifier, &pending.nonce).await {
        Ok(signed) => signed,
        Err(why) => {
            return denied(
                &state,
                Flow::SignIn,
                "not_completed",
                "-",
                &why,
                &format!("The sign-in could not be completed: {why}."),
            );
        }
    };
    match pending.step_up {
        Some(step_up) => stepped_up(&state, issuer, client.step_up_acr.as_deref(), step_up, pending.begun_ms, signed),
        None => signed_in(&state, server, issuer, signed, now).await,
    }
}

/// Which part of the console a refusal ends: a sign-in, or an approval's step-up.
#[derive(Clone, Copy)]
enum Flow {
    SignIn,
    StepUp,
}

/// A refusal: audited (with why), counted (by `reason`), told (`message`).
fn denied(state: &AppState, flow: Flow, reason: &'static str, who: &str, why: &str, message: &str) -> Response {
    let action = match flow {
        Flow::SignIn => "console.sign_in",
        Flow::StepUp => "console.step_up",
    };
    audit(state, action, AuditOutcome::Denied, who, format!("identity provider: {why}"));
    match flow {
        Flow::SignIn => crate::metrics::console_sign_in("denied"),
        Flow::StepUp => crate::metrics::console_step_up("denied"),
    }
    crate::metrics::idp_sign_in_refused(reason);
    refused(StatusCode::UNAUTHORIZED, message)
}

/// An approval's step-up: the same person, authenticated after it was asked for (and at the
/// level asked, when the deployment names one).
fn stepped_up(
    state: &AppState,
    issuer: &Issuer,
    acr: Option<&str>,
    step_up: StepUp,
    begun_ms: i64,
    signed: crate::oauth::console_client::SignedInAt,
) -> Response {
    if signed.subject != step_up.subject {
        return denied(
            state,
            Flow::StepUp,
            "other_person",
            "-",
            "a step-up signed in as another person",
            "You signed in again as someone else: sign in as yourself to decide.",
        );
    }
    let leeway_ms = 5_000;
    let fresh = signed.claims.auth_time.is_some_and(|at| at * 1000 >= begun_ms - leeway_ms);
    if !fresh {
        return denied(
            state,
            Flow::StepUp,
            "not_fresh",
            "-",
            "the IdP did not authenticate the person again",
            "Your identity provider did not ask you to sign in again; the decision needs a fresh sign-in.",
        );
    }
    if let Some(wanted) = acr
        && signed.claims.acr.as_deref() != Some(wanted)
    {
        return denied(
            state,
            Flow::StepUp,
            "acr",
            "-",
            &format!("the step-up reached acr {:?}, not {wanted}", signed.claims.acr),
            "Your sign-in did not reach the assurance level approvals need.",
        );
    }
    let at_ms = signed.claims.auth_time.unwrap_or_default() * 1000;
    let level = signed.claims.acr.as_deref().map(|a| format!(", acr {a}")).unwrap_or_default();
    let assurance = format!("identity provider {} (fresh sign-in{level})", issuer.settings.issuer);
    if !state.console.proved_by_key(&step_up.session_key, at_ms, &assurance) {
        return refused(StatusCode::UNAUTHORIZED, "Your console session ended meanwhile: sign in again.");
    }
    crate::metrics::console_step_up("success");
    move_on("/console/approvals", &[binding_cookie(state, "", 0)])
}

/// A sign-in: the person (found, made, or refused), their groups' roles, a session.
async fn signed_in(
    state: &AppState,
    server: &ResourceServer,
    issuer: &Issuer,
    signed: crate::oauth::console_client::SignedInAt,
    now: i64,
) -> Response {
    let unavailable = |e: toolgate_domain::StoreError| {
        refused(StatusCode::SERVICE_UNAVAILABLE, &format!("The store cannot answer ({e}); try again shortly."))
    };
    let grants = server.idp_grants(&signed.claims.groups(issuer.groups_claim()));
    use crate::http::oauth_callers::Person;
    let person = crate::http::oauth_callers::person(state, issuer, &signed.subject, &signed.claims, &grants, now);
    let identity = match person.await {
        Ok(Person::Known(identity)) => identity,
        Ok(Person::Removed(tombstone)) => {
            let message = "Your principal was removed from this server: an administrator re-admits you (toolgate principal readmit).";
            let detail = format!("subject {} was principal {}, removed", tombstone.subject, tombstone.principal);
            return denied(state, Flow::SignIn, "principal_gone", "-", &detail, message);
        }
        Ok(Person::NotProvisioned) => {
            let message = format!(
                "You signed in as subject {} of {}, whom this server does not know: ask an administrator to link you (toolgate principal link).",
                signed.subject, issuer.settings.issuer
            );
            return denied(
                state,
                Flow::SignIn,
                "not_provisioned",
                "-",
                &format!("subject {} is not provisioned", signed.subject),
                &message,
            );
        }
        Err(e) => return unavailable(e),
    };
    match state.services.credentials().principal(&identity.principal).await {
        Ok(Some(record)) if record.kind == PrincipalKind::Person => {}
        Ok(_) => {
            return denied(
                state,
                Flow::SignIn,
                "principal_gone",
                &identity.principal,
                "the principal is gone or not a person",
                "Your principal was removed from this server.",
            );
        }
        Err(e) => return unavailable(e),
    }
    let (roles, group_roles) = crate::oauth::resource::roles_of(&grants);
    let at_ms = signed.claims.auth_time.map_or(now, |at| (at * 1000).min(now));
    let assurance = format!("identity provider {}", issuer.settings.issuer);
    let session = ConsoleSession {
        principal: identity.principal.clone(),
        csrf: random_hex::<16>(),
        last_seen_ms: now,
        proof_ms: Some(at_ms),
        assurance: assurance.clone(),
        idp: Some(IdpSession {
            issuer: issuer.settings.issuer.clone(),
            subject: signed.subject.clone(),
            roles,
            group_roles,
        }),
        step_up_ms: 0,
    };
    let value = state.console.open(session);
    let who = signed.claims.email.as_deref().or(signed.claims.name.as_deref()).unwrap_or("no name given");
    audit(
        state,
        "console.sign_in",
        AuditOutcome::Success,
        &identity.principal,
        format!("{assurance}, subject {} ({who})", signed.subject),
    );
    crate::metrics::console_sign_in("success");
    let cookies = [set_cookie(SESSION_COOKIE, &value, secure(state), None), binding_cookie(state, "", 0)];
    move_on("/console/approvals", &cookies).into_response()
}

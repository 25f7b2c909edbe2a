//! Signing in (password, then the TOTP code once a factor is enrolled), enrolling the factor,
//! signing out. Every attempt is audited (never the password or the code); failures count
//! towards a lockout with backoff; a code is accepted once.

use std::sync::Arc;

use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use toolgate_domain::audit::AuditOutcome;
use toolgate_domain::lockout::Attempt;
use toolgate_domain::secrets::random_hex;

use super::factor::{self, code_step, password_matches};
use super::session::{ConsoleSession, SESSION_COOKIE, SIGN_IN_CSRF_COOKIE, cookie, csrf_matches, set_cookie};
use super::{AppState, Fields, SignedIn, audit, field, html, now_ms, pages, secure, see_other};

/// How long the sign-in form may sit before it is submitted.
const SIGN_IN_FORM_SECS: i64 = 600;
/// What a wrong name, password or code is told: never which one was wrong.
const WRONG: &str = "The name, password or code is wrong.";

fn with_cookie(mut response: Response, value: String) -> Response {
    if let Ok(value) = HeaderValue::from_str(&value) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// The sign-in form, with a fresh CSRF token in a cookie of its own (double submit).
fn form(state: &AppState, status: StatusCode, error: Option<&str>) -> Response {
    let csrf = random_hex::<16>();
    let idp =
        state.oauth.as_ref().and_then(|s| s.console.as_ref().map(|(i, _)| s.issuers[*i].settings.issuer.as_str()));
    let page = html(status, pages::sign_in(&csrf, error, idp));
    with_cookie(page, set_cookie(SIGN_IN_CSRF_COOKIE, &csrf, secure(state), Some(SIGN_IN_FORM_SECS)))
}

pub async fn page(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if state.console.current(&headers, now_ms(&state)).is_some() {
        return see_other("/console/approvals");
    }
    form(&state, StatusCode::OK, None)
}

pub async fn submit(State(state): State<Arc<AppState>>, headers: HeaderMap, Form(fields): Form<Fields>) -> Response {
    if !csrf_matches(&cookie(&headers, SIGN_IN_CSRF_COOKIE).unwrap_or_default(), fields.get("csrf").map(String::as_str))
    {
        let message =
            "The sign-in form carried no valid CSRF token (it expired, or it was sent from another page): try again.";
        return form(&state, StatusCode::FORBIDDEN, Some(message));
    }
    let (name, password, code) =
        (field(&fields, "name"), fields.get("password").cloned().unwrap_or_default(), field(&fields, "code"));
    let now = now_ms(&state);
    let store = state.services.sign_in();
    let unavailable =
        |e: toolgate_domain::StoreError| Some(format!("The store cannot answer ({e}); try again shortly."));
    // Counted as failed before anything is checked, atomically with the lock it brings on, so
    // that a parallel burst of guesses cannot outrun the lockout.
    match store.count_attempt(name, now).await {
        Err(e) => return form(&state, StatusCode::SERVICE_UNAVAILABLE, unavailable(e).as_deref()),
        Ok(Attempt::Locked { until_ms }) => {
            audit(&state, "console.sign_in", AuditOutcome::Denied, name, "locked after failed attempts".into());
            crate::metrics::console_sign_in("locked");
            let message =
                format!("Too many failed attempts: sign-in is locked for {} s more.", seconds_until(until_ms, now));
            return form(&state, StatusCode::TOO_MANY_REQUESTS, Some(&message));
        }
        Ok(Attempt::Unknown | Attempt::Counted { .. }) => {}
    }
    let record = match store.sign_in_record(name).await {
        Ok(record) => record,
        Err(e) => return form(&state, StatusCode::SERVICE_UNAVAILABLE, unavailable(e).as_deref()),
    };
    // argon2 is deliberately slow: off the async threads.
    let hash = record.as_ref().and_then(|r| r.password_hash.clone());
    let matches =
        tokio::task::spawn_blocking(move || password_matches(hash.as_deref(), &password)).await.unwrap_or(false);
    let Some(record) = record.filter(|_| matches) else {
        return failed(&state, name, "wrong name or password", WRONG);
    };
    let (proof_ms, assurance) = match (&record.totp_secret, record.totp_confirmed) {
        (Some(secret), true) => match take_code(&state, name, secret, code, now).await {
            Ok(()) => (Some(now), "password+totp"),
            Err(message) => return failed(&state, name, "wrong or replayed code", &message),
        },
        _ => (None, "password (no factor enrolled yet)"),
    };
    let _ = store.sign_in_succeeded(name).await;
    let session = ConsoleSession {
        principal: name.to_string(),
        csrf: random_hex::<16>(),
        last_seen_ms: now,
        proof_ms,
        assurance: assurance.to_string(),
        idp: None,
        // The server's window is set when the session opens.
        step_up_ms: 0,
    };
    let value = state.console.open(session);
    audit(&state, "console.sign_in", AuditOutcome::Success, name, assurance.to_string());
    crate::metrics::console_sign_in("success");
    let next = if proof_ms.is_some() { "/console/approvals" } else { "/console/enroll" };
    let response = with_cookie(see_other(next), set_cookie(SESSION_COOKIE, &value, secure(&state), None));
    with_cookie(response, set_cookie(SIGN_IN_CSRF_COOKIE, "", secure(&state), Some(0)))
}

/// Whole seconds from `now_ms` until `until_ms`, rounded up.
fn seconds_until(until_ms: i64, now_ms: i64) -> i64 {
    (until_ms - now_ms + 999) / 1000
}

/// A failed attempt (already counted, before it was checked): audited, told.
fn failed(state: &AppState, name: &str, why: &str, message: &str) -> Response {
    audit(state, "console.sign_in", AuditOutcome::Denied, name, why.to_string());
    crate::metrics::console_sign_in("denied");
    form(state, StatusCode::UNAUTHORIZED, Some(message))
}

/// A step-up: checks a TOTP code of `principal`'s enrolled factor and takes its time step,
/// so that the same code is refused a second time. Counted with sign-in's failures (before it
/// is checked, so a locked principal's codes are not looked at), each refusal audited as
/// `console.step_up`. Err: what to tell the person.
pub async fn prove_code(state: &AppState, principal: &str, code: &str, now: i64) -> Result<(), String> {
    let store = &state.services.sign_in();
    let refused = |why: &str, result: &'static str, message: String| {
        audit(state, "console.step_up", AuditOutcome::Denied, principal, why.to_string());
        crate::metrics::console_step_up(result);
        Err(message)
    };
    let unavailable = |e: toolgate_domain::StoreError| format!("The store cannot answer ({e}).");
    if let Attempt::Locked { until_ms } = store.count_attempt(principal, now).await.map_err(unavailable)? {
        let message = format!(
            "Too many failed attempts: codes (and sign-in) are refused for {} s more.",
            seconds_until(until_ms, now)
        );
        return refused("locked after failed attempts", "locked", message);
    }
    let record = store.sign_in_record(principal).await.map_err(unavailable)?;
    let Some(secret) = record.and_then(|r| r.totp_secret.filter(|_| r.totp_confirmed)) else {
        return refused("no factor enrolled", "denied", "No second factor is enrolled for you.".into());
    };
    match take_code(state, principal, &secret, code, now).await {
        Ok(()) => {
            store.sign_in_succeeded(principal).await.map_err(unavailable)?;
            crate::metrics::console_step_up("success");
            Ok(())
        }
        Err(message) => refused("wrong or replayed code", "denied", message),
    }
}

/// Checks `code` against `secret` (enrolled or being enrolled) and takes its time step once.
async fn take_code(state: &AppState, principal: &str, secret: &str, code: &str, now: i64) -> Result<(), String> {
    let step = code_step(secret, principal, code, now).map_err(|e| e.to_string())?.ok_or_else(|| WRONG.to_string())?;
    match state.services.sign_in().take_totp_step(principal, step).await {
        Ok(true) => Ok(()),
        Ok(false) => Err("This code was used already: wait for the next one (a code counts once).".into()),
        Err(e) => Err(format!("The store cannot answer ({e}).")),
    }
}

/// Any session may sign out, enrolled or not.
pub async fn sign_out(State(state): State<Arc<AppState>>, headers: HeaderMap, Form(fields): Form<Fields>) -> Response {
    let Ok(Some(who)) = SignedIn::load(&state, &headers).await else { return see_other("/console/sign-in") };
    if let Some(refused) = who.csrf_refusal(&fields) {
        return refused;
    }
    state.console.close(&headers);
    audit(&state, "console.sign_out", AuditOutcome::Success, &who.0.principal, String::new());
    with_cookie(see_other("/console/sign-in"), set_cookie(SESSION_COOKIE, "", secure(&state), Some(0)))
}

/// The enrollment page: a QR code of the pending secret (made once, kept until confirmed).
pub async fn enroll_page(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    enrollment(&state, &headers, None, StatusCode::OK).await
}

async fn enrollment(state: &AppState, headers: &HeaderMap, error: Option<&str>, status: StatusCode) -> Response {
    let Some(session) = state.console.current(headers, now_ms(state)) else { return see_other("/console/sign-in") };
    if session.enrolled() {
        return see_other("/console/approvals");
    }
    let store = &state.services.sign_in();
    let pending = store.sign_in_record(&session.principal).await.ok().flatten().and_then(|r| r.totp_secret);
    let secret = match pending {
        Some(secret) => secret,
        None => {
            let secret = factor::new_totp_secret();
            if let Err(e) = store.begin_totp(&session.principal, &secret).await {
                return html(
                    StatusCode::SERVICE_UNAVAILABLE,
                    pages::refused("Unavailable", &e.to_string(), &chrome(&session)),
                );
            }
            secret
        }
    };
    let svg = factor::enrollment_url(&secret, &session.principal)
        .ok()
        .and_then(|url| qrcode::QrCode::new(url.as_bytes()).ok())
        .map(|qr| qr.render::<qrcode::render::svg::Color<'_>>().min_dimensions(200, 200).build())
        .unwrap_or_default();
    html(status, pages::enroll(&session.principal, &session.csrf, &secret, &svg, error))
}

fn chrome(session: &ConsoleSession) -> pages::Chrome<'_> {
    pages::Chrome { principal: Some(&session.principal), csrf: Some(&session.csrf), enrolled: session.enrolled() }
}

pub async fn enroll(State(state): State<Arc<AppState>>, headers: HeaderMap, Form(fields): Form<Fields>) -> Response {
    let now = now_ms(&state);
    let Some(session) = state.console.current(&headers, now) else { return see_other("/console/sign-in") };
    if !csrf_matches(&session.csrf, fields.get("csrf").map(String::as_str)) {
        let message = "This form carried no valid CSRF token: reload the page and submit again.";
        return html(StatusCode::FORBIDDEN, pages::refused("Refused", message, &chrome(&session)));
    }
    let store = &state.services.sign_in();
    let secret = store.sign_in_record(&session.principal).await.ok().flatten().and_then(|r| r.totp_secret);
    let taken = match secret {
        Some(secret) => take_code(&state, &session.principal, &secret, field(&fields, "code"), now).await.is_ok(),
        None => false,
    };
    if !taken {
        let message =
            "That code does not match (check the device's clock), or it was used already: enter the next one.";
        return enrollment(&state, &headers, Some(message), StatusCode::UNAUTHORIZED).await;
    }
    if let Err(e) = store.confirm_totp(&session.principal, now).await {
        return html(StatusCode::SERVICE_UNAVAILABLE, pages::refused("Unavailable", &e.to_string(), &chrome(&session)));
    }
    state.console.proved(&headers, now);
    audit(
        &state,
        "console.totp_enrolled",
        AuditOutcome::Success,
        &session.principal,
        "authenticator app enrolled".into(),
    );
    see_other("/console/approvals")
}

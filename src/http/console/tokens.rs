//! A principal's own API tokens: listed, created (a fresh TOTP code every time: minting a
//! credential is never a silent self-service step; at most 90 days; the secret shown once)
//! and revoked. Only the signed-in principal's tokens are ever shown or touched.

use std::sync::Arc;

use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::html;
use toolgate_domain::audit::AuditOutcome;
use toolgate_domain::tokens::{MAX_TOKEN_DAYS, NewToken, TokenRecord};

use super::{AppState, Fields, SignedIn, audit, field, html as respond, now_ms, pages, sign_in};
use crate::registry::CATALOGUE;

/// The tier choice that makes an API credential (no MCP tier; reviewers only).
const API_CHOICE: &str = "api";

async fn listing(
    state: &AppState,
    who: &SignedIn,
    error: Option<&str>,
    secret: Option<(&TokenRecord, &str)>,
    status: StatusCode,
) -> Response {
    let services = &state.services;
    let mine = match services.credentials().tokens(Some(&who.0.principal)).await {
        Ok(t) => t,
        Err(e) => {
            return who.unavailable(e);
        }
    };
    let now = services.clock().now_secs();
    let body = html! {
        (pages::messages(error, None))
        @if let Some((record, secret)) = secret {
            div.notice #created {
                "Created " code { (record.id) } ". Its secret is shown only now: "
                code #new-secret { (secret) }
            }
        }
        h2 { "Your tokens" }
        @if mine.is_empty() { p #no-tokens { "You have no tokens yet." } }
        table #tokens {
            tr { th { "Id" } th { "Name" } th { "Tier" } th { "Created" } th { "Expires" } th { "State" } th {} }
            @for t in &mine {
                tr {
                    td { code { (t.id) } } td { (t.name) } td { (t.tier.as_deref().unwrap_or("API (no MCP tier)")) }
                    td { (pages::when(t.created_at)) } td { (pages::when(t.expires_at)) }
                    td { @if t.revoked_at.is_some() { "revoked" } @else if t.expires_at <= now { "expired" } @else { "active" } }
                    td {
                        @if t.revoked_at.is_none() && t.expires_at > now {
                            form.inline method="post" action={ "/console/tokens/" (t.id) "/revoke" } {
                                input type="hidden" name="csrf" value=(who.0.csrf);
                                button type="submit" { "Revoke" }
                            }
                        }
                    }
                }
            }
        }
        h2 { "New token" }
        form method="post" action="/console/tokens" {
            input type="hidden" name="csrf" value=(who.0.csrf);
            label { "Name " input type="text" name="name" maxlength="64" required; }
            label { "Tier "
                select name="tier" {
                    @for tier in CATALOGUE.tiers { option value=(tier.name) { (tier.name) } }
                    option value=(API_CHOICE) { "API (no MCP tier; reviewers)" }
                }
            }
            label { "Expires in (days, at most " (MAX_TOKEN_DAYS) ") " input type="number" name="days" min="1" max=(MAX_TOKEN_DAYS) value="30" required; }
            @if who.0.idp.is_some() {
                (pages::step_up_code(who.0.proof_fresh(now_ms(state)), true))
            } @else {
                label { "Code from your authenticator app " input type="text" name="code" inputmode="numeric" autocomplete="one-time-code" required; }
            }
            button type="submit" { "Create" }
        }
    };
    respond(status, pages::layout("Tokens", &who.chrome(), body))
}

pub async fn page(State(state): State<Arc<AppState>>, who: SignedIn) -> Response {
    listing(&state, &who, None, None, StatusCode::OK).await
}

pub async fn create(
    State(state): State<Arc<AppState>>,
    who: SignedIn,
    headers: HeaderMap,
    Form(fields): Form<Fields>,
) -> Response {
    if let Some(refused) = who.csrf_refusal(&fields) {
        return refused;
    }
    let (state, who) = (&*state, &who);
    let refuse = |message: String, status| async move { listing(state, who, Some(&message), None, status).await };
    let name = field(&fields, "name");
    if name.is_empty() || name.chars().count() > 64 {
        return refuse("Give the token a name of 1 to 64 characters.".into(), StatusCode::BAD_REQUEST).await;
    }
    let tier = match field(&fields, "tier") {
        API_CHOICE => None,
        t => match CATALOGUE.tier(t) {
            Some(tier) => Some(tier.name),
            None => return refuse(format!("There is no tier `{t}`."), StatusCode::BAD_REQUEST).await,
        },
    };
    if tier.is_none() && who.reviewer_refusal(state).is_some() {
        return refuse(
            "An API credential is for reviewers; your roles do not grant reviewing.".into(),
            StatusCode::FORBIDDEN,
        )
        .await;
    }
    let days: i64 = match field(&fields, "days").parse() {
        Ok(d) if (1..=MAX_TOKEN_DAYS).contains(&d) => d,
        _ => return refuse(format!("Expiry is 1 to {MAX_TOKEN_DAYS} days."), StatusCode::BAD_REQUEST).await,
    };
    // A fresh proof for every credential minted: a code, however recent the last one; for a
    // person signed in through the IdP, a sign-in there within the step-up window.
    let now = now_ms(state);
    let assurance = match &who.0.idp {
        Some(_) if who.0.proof_fresh(now) => format!("{} (proof within the step-up window)", who.0.assurance),
        Some(_) => {
            let message = "A new credential needs a fresh sign-in at your identity provider: use \"Sign in again\", then create it.";
            return refuse(message.into(), StatusCode::UNAUTHORIZED).await;
        }
        None => {
            if let Err(message) = sign_in::prove_code(state, &who.0.principal, field(&fields, "code"), now).await {
                return refuse(message, StatusCode::UNAUTHORIZED).await;
            }
            state.console.proved(&headers, now);
            "password+totp (fresh code)".to_string()
        }
    };
    let services = &state.services;
    let now_secs = services.clock().now_secs();
    let new = NewToken {
        principal: &who.0.principal,
        tier,
        name,
        now: now_secs,
        expires_at: now_secs + days * 86_400,
        toolsets: None,
    };
    match services.credentials().create_token(new).await {
        Ok((record, secret)) => {
            let detail =
                format!("token {} ({}), {days} days; assurance: {assurance}", record.id, tier.unwrap_or("API"));
            audit(state, "console.token_create", AuditOutcome::Success, &who.0.principal, detail);
            listing(state, who, None, Some((&record, &secret)), StatusCode::OK).await
        }
        Err(e) => refuse(format!("The store cannot answer ({e})."), StatusCode::SERVICE_UNAVAILABLE).await,
    }
}

pub async fn revoke(
    State(state): State<Arc<AppState>>,
    who: SignedIn,
    Path(id): Path<String>,
    Form(fields): Form<Fields>,
) -> Response {
    if let Some(refused) = who.csrf_refusal(&fields) {
        return refused;
    }
    let credentials = state.services.credentials();
    // Another principal's token reads exactly like one that does not exist.
    let mine = credentials.token(&id).await.ok().flatten().filter(|t| t.principal == who.0.principal);
    if mine.is_none() {
        return listing(&state, &who, Some(&format!("You have no token `{id}`.")), None, StatusCode::NOT_FOUND).await;
    }
    let now = state.services.clock().now_secs();
    match credentials.revoke_token(&id, now).await {
        Ok(_) => {
            audit(&state, "console.token_revoke", AuditOutcome::Success, &who.0.principal, format!("token {id}"));
            listing(&state, &who, None, None, StatusCode::OK).await
        }
        Err(e) => {
            listing(
                &state,
                &who,
                Some(&format!("The store cannot answer ({e}).")),
                None,
                StatusCode::SERVICE_UNAVAILABLE,
            )
            .await
        }
    }
}

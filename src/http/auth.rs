//! Authentication: [`authenticate`] (and the [`Authenticated`] extractor) reads the bearer
//! token, looks it up and audits every failure. [`mcp_caller`] (a token with an MCP tier) and
//! [`Reviewer`] (an administrator's tierless credential whose roles may decide approvals)
//! refine it.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use toolgate_domain::tokens::{Authentication, PrincipalRecord, TokenRecord};
use toolgate_domain::toolsets;
use toolgate_domain::{Caller, CredentialKind};

use super::admission::Connection;
use super::auth_failures::audit_failure;
use super::{ApiError, AppState};

/// A valid, unexpired, unrevoked token and its principal.
pub struct Authenticated {
    pub token: TokenRecord,
    pub principal: PrincipalRecord,
}

fn presented_token(headers: &HeaderMap) -> Option<&str> {
    if let Some(value) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        let (scheme, token) = value.trim().split_once(' ')?;
        return scheme.eq_ignore_ascii_case("bearer").then_some(token.trim());
    }
    headers.get("x-toolgate-token").and_then(|v| v.to_str().ok()).map(str::trim)
}

/// The presented secret, or the refusal (audited) when there is none.
fn secret<'h>(state: &AppState, headers: &'h HeaderMap, connection: &Connection) -> Result<&'h str, ApiError> {
    presented_token(headers).filter(|t| !t.is_empty()).ok_or_else(|| {
        audit_failure(state, connection, "no token");
        ApiError::unauthorized(
            "send `Authorization: Bearer <token>` (or X-Toolgate-Token); `toolgate token create` makes one",
            false,
        )
    })
}

/// Looks the request's token up in the store (through its cache); every failure is audited.
pub async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
    connection: &Connection,
) -> Result<Authenticated, ApiError> {
    let secret = secret(state, headers, connection)?;
    let services = &state.services;
    match services.credentials().authenticate(secret, services.clock().now_secs()).await? {
        Authentication::Valid { token, principal } => {
            // The connection no longer counts among the unauthenticated ones.
            connection.authenticated();
            Ok(Authenticated { token, principal })
        }
        failure => {
            audit_failure(state, connection, &format!("{failure:?} token").to_lowercase());
            Err(ApiError::unauthorized("the token is unknown, revoked or expired; ask for a new one", true))
        }
    }
}

impl FromRequestParts<Arc<AppState>> for Authenticated {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<AppState>) -> Result<Self, ApiError> {
        authenticate(state, &parts.headers, &Connection::of(&parts.extensions)).await
    }
}

/// What a valid credential is to MCP: its caller, or (Err) the id of a token without an MCP
/// tier. Derived once per authentication-cache entry.
type McpIdentity = Result<Arc<Caller>, String>;

fn mcp_identity(state: &AppState, token: &TokenRecord, principal: &PrincipalRecord) -> McpIdentity {
    let Some(tier_name) = &token.tier else { return Err(token.id.clone()) };
    let catalogue = state.services.catalogue();
    let tier = catalogue.tier(tier_name);
    let tier_default = tier.and_then(|t| catalogue.tier_toolsets.get(t.index).copied()).unwrap_or_default();
    Ok(Arc::new(Caller {
        principal: principal.principal(),
        token_id: token.id.clone(),
        tier,
        tier_name: tier_name.clone(),
        credential: CredentialKind::Token,
        toolsets: token.toolsets.as_deref().and_then(|t| toolsets::stored(t, catalogue.toolsets, tier_default)),
    }))
}

/// An MCP caller: an authenticated token that carries an MCP tier. A token the cache holds is
/// answered from its entry, without a copy; any other is looked up ([`authenticate`]).
pub async fn mcp_caller(
    state: &AppState,
    headers: &HeaderMap,
    connection: &Connection,
) -> Result<Arc<Caller>, ApiError> {
    let secret = secret(state, headers, connection)?;
    if let Some(server) = &state.oauth
        && crate::oauth::resource::ResourceServer::takes(secret)
    {
        return super::oauth_callers::oauth_caller(state, server, secret, connection).await;
    }
    let identity = match state.services.credentials().cached(secret) {
        Some(cached) => {
            connection.authenticated();
            cached.derived(|c| mcp_identity(state, &c.token, &c.principal)).as_ref().clone()
        }
        None => {
            let Authenticated { token, principal } = authenticate(state, headers, connection).await?;
            mcp_identity(state, &token, &principal)
        }
    };
    identity.map_err(|token_id| {
        audit_failure(state, connection, &format!("token {token_id} has no MCP tier"));
        ApiError::unauthorized("this credential has no MCP tier: it is for the approval API, not for MCP", true)
    })
}

/// A reader of the approval and audit API: a principal allowed to review (policy.yaml
/// `server.reviewer_permission`, fleet-wide or on management groups), holding an
/// administrator's tierless credential. Deciding takes a console session with a second factor
/// (`console`): no token ever decides.
pub struct Reviewer {
    pub principal: toolgate_domain::Principal,
}

impl FromRequestParts<Arc<AppState>> for Reviewer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<AppState>) -> Result<Self, ApiError> {
        let Authenticated { token, principal } = Authenticated::from_request_parts(parts, state).await?;
        if token.tier.is_some() {
            return Err(ApiError::forbidden(
                "mcp_token",
                "this route takes an administrator API token (toolgate token create --principal P --api), not an MCP token; approving takes a console session (/console)",
            ));
        }
        let catalogue = state.services.catalogue();
        let principal = principal.principal();
        if catalogue.review_reach(&principal).is_none() {
            return Err(ApiError::forbidden(
                "not_a_reviewer",
                format!("this principal's roles (fleet-wide or on groups) do not grant {}", catalogue.reviewer),
            ));
        }
        Ok(Reviewer { principal })
    }
}

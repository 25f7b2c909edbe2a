//! What an OAuth client reads before it has a token (RFC 9728): this resource's metadata, at
//! `/.well-known/oauth-protected-resource` and at the path form for the MCP endpoint; and the
//! challenge on every 401, naming that metadata and the scope to ask for.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::get;

use toolgate_domain::audit::{AuditEvent, AuditOutcome, AuditSink};
use toolgate_domain::{Caller, CredentialKind};
use toolgate_policy::Decision;

use super::{ApiError, AppState, json_response};
use crate::registry::ToolId;

pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route(METADATA_PATH, get(metadata))
        .route(&format!("{METADATA_PATH}/mcp"), get(metadata))
        .route(&format!("{METADATA_PATH}/mcp/v1"), get(metadata))
}

async fn metadata(State(state): State<Arc<AppState>>) -> Response {
    let Some(server) = &state.oauth else {
        let body = serde_json::json!({"error": "not_found", "message": "this server takes no OAuth access tokens: it has no `oauth` in its deployment settings (docs/sign-in.md)"});
        return json_response(StatusCode::NOT_FOUND, body.to_string());
    };
    let mut response = json_response(StatusCode::OK, server.metadata().to_string());
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
    response
}

/// A 401 names where to sign in (when the server takes access tokens); a challenge that
/// already names its metadata (an access token's own refusal) is left as it is.
pub fn challenged(state: &AppState, mut response: Response) -> Response {
    let Some(server) = &state.oauth else { return response };
    if response.status() != StatusCode::UNAUTHORIZED {
        return response;
    }
    let existing = response.headers().get(header::WWW_AUTHENTICATE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if existing.contains("resource_metadata=") {
        return response;
    }
    let error = existing.contains(r#"error="invalid_token""#).then_some("invalid_token");
    if let Ok(value) = HeaderValue::from_str(&server.challenge(error, server.challenge_scope)) {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// [`challenged`] as a layer of the router.
pub async fn challenge_layer(State(state): State<Arc<AppState>>, response: Response) -> Response {
    challenged(&state, response)
}

/// A tools/call that an access token's tier does not allow, answered HTTP 403
/// `insufficient_scope` naming the scope that would (the step-up of MCP 2025-11-25 on), so the
/// client can sign in again for it. `tg_` tokens keep -32004: nothing can widen them. Only a
/// lone request: a batch's other requests must still be answered.
pub fn scope_too_small(state: &AppState, caller: &Caller, body: &[u8]) -> Option<ApiError> {
    // Under --read-only the kill switch answers first, whatever the tier.
    let server =
        state.oauth.as_ref().filter(|_| caller.credential == CredentialKind::AccessToken && !state.config.read_only)?;
    #[derive(serde::Deserialize)]
    struct Call<'a> {
        method: &'a str,
        #[serde(default, borrow)]
        params: Option<Params<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(default, borrow)]
        name: Option<std::borrow::Cow<'a, str>>,
    }
    let call: Call = serde_json::from_slice(body).ok()?;
    if call.method != "tools/call" {
        return None;
    }
    let meta = ToolId::from_name(call.params?.name?.as_ref())?.meta();
    if state.services.catalogue().decision(meta, caller.tier) != Decision::Deny {
        return None;
    }
    let scope = server.scope_allowing(meta.securable, meta.operation)?;
    let challenge = HeaderValue::from_str(&server.challenge(Some("insufficient_scope"), scope)).ok()?;
    let message = format!(
        "{} needs {}:{}, which tier {} does not allow: sign in again asking for the scope {scope} (one tier scope per token)",
        meta.name,
        meta.securable,
        meta.operation,
        caller.tier_label()
    );
    crate::metrics::token_refused("insufficient_scope");
    let event = AuditEvent::new(state.services.clock().now_ms(), format!("mcp.{}", meta.name), AuditOutcome::Denied)
        .by(caller)
        .detail(format!("insufficient_scope: {message}"))
        .correlation(state.mcp.correlation_id());
    state.services.audit().record(event);
    Some(
        ApiError::new(StatusCode::FORBIDDEN, "insufficient_scope", message)
            .with_header_value(header::WWW_AUTHENTICATE, challenge),
    )
}

//! The HTTP edge: routes, Host/Origin checks, authentication and body limits. Everything
//! refused here is refused before the body is read, with `Connection: close`, so a refused
//! upload never corrupts a keep-alive connection.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use serde_json::json;

use super::protocol::{self, Caller, Reply};
use super::{AppState, MAX_BODY_BYTES};
use crate::registry::Tier;
use crate::store::Authentication;

pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/mcp", any(mcp))
        .route("/mcp/", any(mcp))
        .route("/mcp/v1", any(mcp))
        .route("/mcp/v1/", any(mcp))
        .merge(super::api::routes())
        .fallback(not_found)
        .with_state(state)
}

async fn healthz() -> Response {
    json_response(StatusCode::OK, json!({"status": "ok"}).to_string())
}

async fn not_found() -> Response {
    json_response(
        StatusCode::NOT_FOUND,
        json!({"error": "not_found", "message": "the MCP endpoint is POST /mcp (or /mcp/v1/)"}).to_string(),
    )
}

fn json_response(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}

/// A refusal before the body was read: the connection is closed rather than drained.
fn refuse(status: StatusCode, error: &str, message: &str) -> Response {
    let mut response = json_response(status, json!({"error": error, "message": message}).to_string());
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

fn unauthorized(message: &str, invalid_token: bool) -> Response {
    let mut response = refuse(StatusCode::UNAUTHORIZED, "unauthorized", message);
    let challenge =
        if invalid_token { r#"Bearer realm="toolgate", error="invalid_token""# } else { r#"Bearer realm="toolgate""# };
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
    response
}

fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, port)| if port.chars().all(|c| c.is_ascii_digit()) { h } else { host })
    };
    matches!(name.to_ascii_lowercase().as_str(), "localhost" | "127.0.0.1" | "::1")
}

fn origin_allowed(state: &AppState, origin: &str) -> bool {
    if state.config.allowed_origins.iter().any(|o| o == origin) {
        return true;
    }
    match origin.split_once("://") {
        Some(("http" | "https", authority)) => is_loopback_host(authority.trim_end_matches('/')),
        _ => false,
    }
}

/// DNS-rebinding protection: a foreign `Origin` always, a foreign `Host` on a loopback bind.
pub(super) fn check_host_and_origin(state: &AppState, headers: &HeaderMap) -> Result<(), Response> {
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ok = origin.to_str().is_ok_and(|o| origin_allowed(state, o));
        if !ok {
            return Err(refuse(
                StatusCode::FORBIDDEN,
                "forbidden_origin",
                "this Origin may not call the server (see --allowed-origin)",
            ));
        }
    }
    if state.config.listen.ip().is_loopback()
        && let Some(host) = headers.get(header::HOST)
        && !host.to_str().is_ok_and(is_loopback_host)
    {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            "forbidden_host",
            "the server is bound to loopback; use localhost or 127.0.0.1 in the URL",
        ));
    }
    Ok(())
}

fn presented_token(headers: &HeaderMap) -> Option<&str> {
    if let Some(value) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        let (scheme, token) = value.trim().split_once(' ')?;
        return scheme.eq_ignore_ascii_case("bearer").then_some(token.trim());
    }
    headers.get("x-toolgate-token").and_then(|v| v.to_str().ok()).map(str::trim)
}

fn audit_auth_failure(state: &AppState, detail: &str) {
    state.audit.record(crate::store::AuditEntry {
        at_ms: state.clock.now_ms(),
        principal: None,
        token_id: None,
        action: "auth.failure".into(),
        target: None,
        result: "denied".into(),
        detail: Some(detail.into()),
        correlation_id: Some(state.correlation_id()),
    });
}

fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<Caller, Response> {
    let Some(secret) = presented_token(headers).filter(|t| !t.is_empty()) else {
        audit_auth_failure(state, "no token");
        return Err(unauthorized(
            "send `Authorization: Bearer <token>` (or X-Toolgate-Token); `toolgate token create` makes one",
            false,
        ));
    };
    match state.store.authenticate(secret, state.clock.now_secs()) {
        Ok(Authentication::Valid { token, principal }) => {
            let Some(tier_name) = token.tier.clone() else {
                audit_auth_failure(state, &format!("token {} has no MCP tier", token.id));
                return Err(unauthorized(
                    "this credential has no MCP tier: it is for the approval API, not for MCP",
                    true,
                ));
            };
            Ok(Caller { tier: Tier::from_name(&tier_name), tier_name, principal, token })
        }
        Ok(failure @ (Authentication::Unknown | Authentication::Revoked | Authentication::Expired)) => {
            audit_auth_failure(state, &format!("{failure:?} token").to_lowercase());
            Err(unauthorized("the token is unknown, revoked or expired; ask for a new one", true))
        }
        Err(e) => {
            tracing::error!("authentication failed on a store error: {e}");
            let mut r = refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                "the token store is unavailable; retry shortly",
            );
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            Err(r)
        }
    }
}

/// Content-Length present and at most 4 MiB, no chunking, identity encoding.
fn check_body_headers(headers: &HeaderMap) -> Result<(), Response> {
    if let Some(encoding) = headers.get(header::CONTENT_ENCODING)
        && !encoding.to_str().is_ok_and(|e| e.trim().eq_ignore_ascii_case("identity"))
    {
        return Err(refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_encoding",
            "send the body uncompressed (Content-Encoding: identity)",
        ));
    }
    if headers.get(header::TRANSFER_ENCODING).is_some() {
        return Err(refuse(
            StatusCode::LENGTH_REQUIRED,
            "length_required",
            "send the body with a Content-Length, not chunked",
        ));
    }
    let Some(length) = headers.get(header::CONTENT_LENGTH) else {
        return Err(refuse(StatusCode::LENGTH_REQUIRED, "length_required", "send a Content-Length header"));
    };
    match length.to_str().ok().and_then(|l| l.trim().parse::<u64>().ok()) {
        Some(n) if n <= MAX_BODY_BYTES => Ok(()),
        Some(_) => {
            Err(refuse(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", "a request body may be at most 4 MiB"))
        }
        None => Err(refuse(StatusCode::BAD_REQUEST, "bad_content_length", "Content-Length is not a number")),
    }
}

async fn mcp(State(state): State<Arc<AppState>>, method: Method, headers: HeaderMap, body: Body) -> Response {
    if let Err(refusal) = check_host_and_origin(&state, &headers) {
        return refusal;
    }
    if state.config.mcp_disable {
        let body = crate::server::jsonrpc::error(
            &serde_json::Value::Null,
            crate::server::jsonrpc::DISABLED,
            "MCP is disabled on this server",
            Some(json!({
                "retry_after_ms": null,
                "remediation": "the operator started toolgate with --mcp-disable; ask them to re-enable MCP",
            })),
        );
        let mut r = json_response(StatusCode::SERVICE_UNAVAILABLE, body);
        r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
        return r;
    }
    if method != Method::POST && method != Method::DELETE {
        let mut r = refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "POST a JSON-RPC message; this server opens no GET stream",
        );
        r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
        return r;
    }
    let caller = match authenticate(&state, &headers) {
        Ok(c) => c,
        Err(r) => return r,
    };
    if method == Method::DELETE {
        return render(protocol::end_session(&state, &caller, &headers));
    }
    if let Err(refusal) = check_body_headers(&headers) {
        return refusal;
    }
    let bytes: Bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES as usize).await {
        Ok(b) => b,
        Err(_) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "bad_body",
                "the body could not be read in full (or exceeded its Content-Length)",
            );
        }
    };
    render(protocol::handle(&state, &caller, &headers, &bytes).await)
}

fn render(reply: Reply) -> Response {
    let mut response = match reply.body {
        Some(body) => json_response(reply.status, body),
        None => reply.status.into_response(),
    };
    if let Some(id) = reply.session_id.and_then(|id| HeaderValue::from_str(&id).ok()) {
        response.headers_mut().insert("mcp-session-id", id);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for h in ["localhost", "localhost:8080", "127.0.0.1:1", "[::1]:80", "LOCALHOST"] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in ["evil.example.com", "evil.example.com:80", "127.0.0.2", "localhost.evil.com"] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }
}

//! CORS for what a browser-based MCP client calls: the MCP endpoint and the OAuth metadata. An
//! Origin the edge allows (listed with `--allowed-origin`, or this machine's own) gets its
//! preflight answered and may read the answers and the headers an MCP client needs
//! (`Mcp-Session-Id`, `MCP-Protocol-Version`, `WWW-Authenticate`); any other gets no CORS
//! headers at all, so the browser keeps the answer from the page. Credentials (cookies) are
//! never allowed: MCP clients send a bearer token, and `--allowed-origin '*'` is answered with
//! `*`, which browsers never pair with credentials.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::edge::{ANY_ORIGIN, check_host_and_origin, origin_allowed};

/// What a page may send: the MCP transport's headers (both eras), and the token's.
const REQUEST_HEADERS: [&str; 9] = [
    "authorization",
    "content-type",
    "accept",
    "last-event-id",
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "x-toolgate-token",
];
/// `Mcp-Param-{Name}`: one per argument a tool marks `x-mcp-header` (2026-07-28).
const PARAM_HEADER_PREFIX: &str = "mcp-param-";
/// What a page may read of an answer besides the CORS-safelisted headers.
const EXPOSED: &str = "Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate, X-Correlation-Id, Retry-After";
const METHODS: &str = "GET, POST, DELETE, OPTIONS";
/// How long a browser may keep a preflight's answer.
const MAX_AGE_SECS: &str = "600";

/// The Origin a page sent, when the edge allows it: what `Access-Control-Allow-Origin` says
/// (the origin itself, or `*` when the operator allowed every one). None without an Origin.
pub fn allowed_origin(state: &AppState, headers: &HeaderMap) -> Option<HeaderValue> {
    let origin = headers.get(header::ORIGIN)?;
    if state.config.allowed_origins.iter().any(|o| o == ANY_ORIGIN) {
        return Some(HeaderValue::from_static(ANY_ORIGIN));
    }
    origin_allowed(state, origin.to_str().ok()?).then(|| origin.clone())
}

/// A browser's preflight (`OPTIONS` with `Access-Control-Request-Method`), answered; None
/// for any other request.
pub fn preflight(state: &AppState, method: &Method, headers: &HeaderMap) -> Option<Response> {
    if method != Method::OPTIONS || !headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD) {
        return None;
    }
    if let Err(refusal) = check_host_and_origin(state, headers, false) {
        return Some(refusal.into_response());
    }
    let Some(origin) = allowed_origin(state, headers) else {
        return Some(StatusCode::FORBIDDEN.into_response());
    };
    let asked = headers.get(header::ACCESS_CONTROL_REQUEST_HEADERS).and_then(|h| h.to_str().ok()).unwrap_or("");
    let names: Vec<String> =
        asked.split(',').map(|h| h.trim().to_ascii_lowercase()).filter(|h| !h.is_empty()).collect();
    let unknown = names.iter().find(|h| !REQUEST_HEADERS.contains(&h.as_str()) && !h.starts_with(PARAM_HEADER_PREFIX));
    if let Some(name) = unknown {
        let message = format!("this server takes no request header `{name}` from a page on another origin");
        return Some((StatusCode::FORBIDDEN, message).into_response());
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    let out = response.headers_mut();
    out.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    out.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(METHODS));
    if let Ok(value) = HeaderValue::from_str(&names.join(", ")) {
        out.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, value);
    }
    out.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static(MAX_AGE_SECS));
    out.insert(header::VARY, HeaderValue::from_static("Origin"));
    Some(response)
}

/// The answer to a page on an allowed origin (`allowed_origin` of its request), readable by
/// it; a request without an Origin (nearly every client) is answered as it is.
pub fn expose(origin: Option<HeaderValue>, mut response: Response) -> Response {
    let Some(origin) = origin else { return response };
    let out = response.headers_mut();
    out.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    out.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSED));
    out.append(header::VARY, HeaderValue::from_static("Origin"));
    response
}

/// CORS for routes of the router (the OAuth metadata): the preflight answered here, the
/// answer exposed to an allowed origin.
pub async fn layer(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    if let Some(answer) = preflight(&state, request.method(), request.headers()) {
        return answer;
    }
    let origin = allowed_origin(&state, request.headers());
    expose(origin, next.run(request).await)
}

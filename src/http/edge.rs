//! Checks made before anything else is read: DNS-rebinding protection (Host and Origin), and
//! the body's headers (a Content-Length of at most 4 MiB, no chunking, no compression).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::future::Future;
use std::sync::Arc;

use futures_util::FutureExt as _;

use super::{ApiError, AppState, MAX_BODY_BYTES};

fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, port)| if port.chars().all(|c| c.is_ascii_digit()) { h } else { host })
    };
    ["localhost", "127.0.0.1", "::1"].iter().any(|l| name.eq_ignore_ascii_case(l))
}

/// `--allowed-origin '*'`: every origin (the operator gives up the Origin check).
pub const ANY_ORIGIN: &str = "*";

pub(super) fn origin_allowed(state: &AppState, origin: &str) -> bool {
    if state.config.allowed_origins.iter().any(|o| o == origin || o == ANY_ORIGIN) {
        return true;
    }
    match origin.split_once("://") {
        Some(("http" | "https", authority)) => is_loopback_host(authority.trim_end_matches('/')),
        _ => false,
    }
}

/// The one middleware of the guarded routes: gives the exchange its correlation id (and every
/// response, refusals, lists, calls and streams alike, the `X-Correlation-Id` header), then
/// refuses a foreign Host or Origin. The MCP endpoint does the same in
/// [`super::mcp_endpoint::exchange`] (it is served ahead of the router).
pub async fn edge(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let console = request.uri().path().starts_with("/console");
    with_correlation_id(&state, async {
        match check_host_and_origin(&state, request.headers(), console) {
            Ok(()) => next.run(request).await,
            Err(refusal) => refusal.into_response(),
        }
    })
    .await
}

/// Runs `work` as one exchange: a fresh correlation id for everything it does, and on its
/// response the `X-Correlation-Id` header. Made of combinators rather than an async fn, which
/// would hold `work` twice over: this wraps the whole MCP answer, a future of kilobytes that
/// is moved on every request.
pub fn with_correlation_id<F: Future<Output = Response>>(state: &AppState, work: F) -> impl Future<Output = Response> {
    let id = state.mcp.new_correlation_id();
    let header = HeaderValue::from_str(&id).ok();
    crate::correlation::scope(id, work).map(move |mut response| {
        if let Some(value) = header {
            response.headers_mut().insert(CORRELATION_HEADER, value);
        }
        response
    })
}

/// The response header that names the exchange (as the audit log and the refusal envelope do).
pub const CORRELATION_HEADER: HeaderName = HeaderName::from_static("x-correlation-id");

/// The MCP endpoint's answer to a foreign Host or Origin: a foreign Origin in JSON-RPC,
/// -32008 with the refusal envelope.
pub fn refuse_mcp(state: &AppState, refusal: ApiError) -> Response {
    if refusal.error() != "forbidden_origin" {
        return refusal.into_response();
    }
    let data = serde_json::json!({
        "correlation_id": state.mcp.correlation_id(),
        "retry_after_ms": null,
        "remediation": "call from a client that sends no Origin, or have the operator allow this one (--allowed-origin scheme://host:port)",
    });
    let body = crate::mcp::jsonrpc::error(
        &serde_json::Value::Null,
        crate::mcp::jsonrpc::FORBIDDEN_ORIGIN,
        "this Origin may not call the server",
        Some(data),
    );
    super::json_response(StatusCode::FORBIDDEN, body)
}

/// A page of the console posting to its own origin (the browser's `Origin` names the `Host`
/// it asked): its cookies are `SameSite=Strict` and its forms carry CSRF tokens.
fn same_origin(headers: &HeaderMap, origin: &str) -> bool {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    origin.split_once("://").is_some_and(|(_, authority)| Some(authority.trim_end_matches('/')) == host)
}

pub fn check_host_and_origin(state: &AppState, headers: &HeaderMap, console: bool) -> Result<(), ApiError> {
    if let Some(origin) = headers.get(header::ORIGIN)
        && !origin.to_str().is_ok_and(|o| origin_allowed(state, o) || (console && same_origin(headers, o)))
    {
        return Err(ApiError::forbidden(
            "forbidden_origin",
            "this Origin may not call the server (see --allowed-origin)",
        ));
    }
    if state.config.listen.ip().is_loopback()
        && let Some(host) = headers.get(header::HOST)
        && !host.to_str().is_ok_and(is_loopback_host)
    {
        return Err(ApiError::forbidden(
            "forbidden_host",
            "the server is bound to loopback; use localhost or 127.0.0.1 in the URL",
        ));
    }
    Ok(())
}

/// Content-Length present and at most 4 MiB, no chunking, identity encoding.
pub fn check_body_headers(headers: &HeaderMap) -> Result<(), ApiError> {
    if let Some(encoding) = headers.get(header::CONTENT_ENCODING)
        && !encoding.to_str().is_ok_and(|e| e.trim().eq_ignore_ascii_case("identity"))
    {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_encoding",
            "send the body uncompressed (Content-Encoding: identity)",
        ));
    }
    if headers.get(header::TRANSFER_ENCODING).is_some() {
        return Err(ApiError::new(
            StatusCode::LENGTH_REQUIRED,
            "length_required",
            "send the body with a Content-Length, not chunked",
        ));
    }
    let Some(length) = headers.get(header::CONTENT_LENGTH) else {
        return Err(ApiError::new(StatusCode::LENGTH_REQUIRED, "length_required", "send a Content-Length header"));
    };
    match length.to_str().ok().and_then(|l| l.trim().parse::<u64>().ok()) {
        Some(n) if n <= MAX_BODY_BYTES => Ok(()),
        Some(_) => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "a request body may be at most 4 MiB",
        )),
        None => Err(ApiError::bad_request("bad_content_length", "Content-Length is not a number")),
    }
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

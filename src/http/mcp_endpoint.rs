//! `POST /mcp` (`GET` for a session's stream, `DELETE` to end a session), served by the
//! listener ahead of the router: the edge's work (correlation id, Host/Origin), the kill switch
//! and the method check before authentication, the body checks after it, then the `mcp` module.

use std::future::Future;
use std::sync::Arc;

use axum::BoxError;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::admission::Connection;
use super::auth::mcp_caller;
use super::edge::{self, check_body_headers};
use super::quotas::{QuotaRefusal, Slot};
use super::{ApiError, AppState, json_response};
use crate::mcp::{Payload, Reply, jsonrpc};

/// The MCP endpoint's paths.
pub const MCP_PATHS: [&str; 4] = ["/mcp", "/mcp/", "/mcp/v1", "/mcp/v1/"];

/// The endpoint with a choice of toolsets in its path (docs/toolsets.md): `/mcp/x/fleet,executions`.
pub const TOOLSETS_PATH: &str = "/mcp/x/{toolsets}";

pub fn is_mcp_path(path: &str) -> bool {
    MCP_PATHS.contains(&path) || toolsets_in_path(path).is_some()
}

/// The toolsets `/mcp/x/{toolsets}` names (percent-decoded), if that is the path.
fn toolsets_in_path(path: &str) -> Option<String> {
    let chosen = path.strip_prefix("/mcp/x/")?;
    let chosen = chosen.strip_suffix('/').unwrap_or(chosen);
    if chosen.is_empty() || chosen.contains('/') {
        return None;
    }
    Some(percent_encoding::percent_decode_str(chosen).decode_utf8_lossy().into_owned())
}

/// The path's choice of toolsets as the request's `X-MCP-Toolsets`, where the MCP layer reads
/// it; a request that makes two different choices is refused.
fn path_choice_as_header(path: &str, headers: &mut axum::http::HeaderMap) -> Result<(), ApiError> {
    let Some(chosen) = toolsets_in_path(path) else { return Ok(()) };
    let name = crate::mcp::TOOLSETS_HEADER;
    match headers.get(name).map(|v| v.to_str().unwrap_or_default()) {
        Some(header) if header.trim() != chosen.trim() => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "conflicting_toolsets",
            format!("the path chooses the toolsets `{chosen}` and the {name} header `{header}`: make one choice"),
        )),
        Some(_) => Ok(()),
        None => {
            let value = HeaderValue::from_str(&chosen).map_err(|_| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_toolsets",
                    "the path's toolsets are not a valid header value",
                )
            })?;
            headers.insert(name, value);
            Ok(())
        }
    }
}

/// The MCP endpoint as a route of the router (in-process callers; the listener calls
/// [`exchange`] itself).
pub async fn mcp(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let connection = Connection::of(request.extensions());
    exchange(&state, &connection, request).await
}

/// One exchange with the MCP endpoint, in this order: the edge's work (a correlation id, the
/// Host/Origin check), then `--mcp-disable` answers everything with -32005 and anything but
/// GET, POST and DELETE is 405 (both before authentication), then the caller is
/// authenticated, then the method is served. One function rather than a middleware layer per
/// step: each layer boxes a future per request on the hottest path.
pub fn exchange<'a, B>(
    state: &'a AppState,
    connection: &'a Connection,
    request: axum::http::Request<B>,
) -> impl Future<Output = Response> + 'a
where
    B: http_body::Body<Data = Bytes> + 'a,
    B::Error: Into<BoxError>,
{
    edge::with_correlation_id(state, respond(state, connection, request))
}

async fn respond<B>(state: &AppState, connection: &Connection, request: axum::http::Request<B>) -> Response
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    if let Some(preflight) = super::cors::preflight(state, request.method(), request.headers()) {
        return preflight;
    }
    if let Err(refusal) = edge::check_host_and_origin(state, request.headers(), false) {
        return edge::refuse_mcp(state, refusal);
    }
    let origin = super::cors::allowed_origin(state, request.headers());
    let response = answer(state, connection, request).await.unwrap_or_else(IntoResponse::into_response);
    super::cors::expose(origin, super::oauth_endpoints::challenged(state, response))
}

async fn answer<B>(
    state: &AppState,
    connection: &Connection,
    request: axum::http::Request<B>,
) -> Result<Response, ApiError>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    if state.config.mcp_disable {
        return Ok(disabled());
    }
    let method = request.method();
    if ![Method::POST, Method::DELETE, Method::GET].contains(method) {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "POST a JSON-RPC message; GET opens a session's stream; DELETE ends a session",
        )
        .with_header(header::ALLOW, "GET, POST, DELETE"));
    }
    if method != Method::POST && state.config.streams.plain_json_only {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "this server answers plain JSON only (--mcp-no-streaming, behind a buffering proxy): it opens no GET stream and keeps no session to DELETE; POST each JSON-RPC message",
        )
        .with_header(header::ALLOW, "POST"));
    }
    let caller = mcp_caller(state, request.headers(), connection).await?;
    // An engine principal's quota on this server; a person's requests are never counted.
    let principal = &caller.principal;
    let slot = match state.quotas.admit(&principal.name, principal.kind).await {
        Ok(slot) => slot,
        Err(refusal) => return Ok(over_quota(state, refusal)),
    };
    let (parts, body) = request.into_parts();
    let mut headers = parts.headers;
    path_choice_as_header(parts.uri.path(), &mut headers)?;
    if parts.method == Method::DELETE {
        return Ok(held(render(state.mcp.end_session(&caller, &headers).await), slot));
    }
    if parts.method == Method::GET {
        return Ok(held(render(state.mcp.open_channel(&caller, &headers).await), slot));
    }
    check_body_headers(&headers)?;
    let bytes = super::read_body(state, body).await?;
    if let Some(refusal) = super::oauth_endpoints::scope_too_small(state, &caller, &bytes) {
        return Err(refusal);
    }
    // Boxed: the answer to a call is a future of kilobytes; held inline, every future around
    // it would grow by as much, and hyper moves the outermost one on every request.
    let reply = Box::pin(crate::mcp::answer_post(&state.mcp, &caller, &headers, &bytes)).await;
    Ok(held(render(reply), slot))
}

/// 429 with -32010: the seeds' second cause of that code, told apart from the session cap by
/// its message and a `retry_after_ms` that is never null.
fn over_quota(state: &AppState, refusal: QuotaRefusal) -> Response {
    crate::metrics::quota_exhausted(refusal.label());
    let retry_after_ms = refusal.retry_after_ms();
    let data = json!({
        "correlation_id": state.mcp.correlation_id(),
        "retry_after_ms": retry_after_ms,
        "remediation": "slow down: this engine principal's quota on this server (policy.yaml engines.quota, or its own) allows no more right now",
    });
    let body = jsonrpc::error(&serde_json::Value::Null, jsonrpc::SESSION_LIMIT, refusal.message(), Some(data));
    let mut response = json_response(StatusCode::TOO_MANY_REQUESTS, body);
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after_ms.div_ceil(1000)));
    response
}

/// The response, holding the request's quota slot until its body has been sent (a stream's
/// until it ends).
fn held(response: Response, slot: Option<Slot>) -> Response {
    let Some(slot) = slot else { return response };
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, Body::new(Held { body, _slot: slot }))
}

struct Held {
    body: Body,
    _slot: Slot,
}

impl http_body::Body for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

fn disabled() -> Response {
    let body = jsonrpc::error(
        &serde_json::Value::Null,
        jsonrpc::DISABLED,
        "MCP is disabled on this server",
        Some(json!({
            "retry_after_ms": null,
            "remediation": "the operator started toolgate with --mcp-disable; ask them to re-enable MCP",
        })),
    );
    let mut r = json_response(StatusCode::SERVICE_UNAVAILABLE, body);
    r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

fn render(reply: Reply) -> Response {
    let mut response = match reply.body {
        Some(Payload::Text(body)) => json_response(reply.status, body),
        Some(Payload::Chunks(chunks)) => {
            let body = Body::new(Chunks { left: chunks.iter().map(|c| c.len() as u64).sum(), chunks: chunks.into() });
            (reply.status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
        }
        Some(Payload::Events(events)) => {
            let headers = [
                (header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream")),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
                (header::HeaderName::from_static("x-accel-buffering"), HeaderValue::from_static("no")),
                (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
            ];
            (reply.status, headers, Body::from_stream(events)).into_response()
        }
        None => reply.status.into_response(),
    };
    if let Some(id) = reply.session_id.and_then(|id| HeaderValue::from_str(&id).ok()) {
        response.headers_mut().insert(crate::mcp::SESSION_ID, id);
    }
    if let Some(ms) = reply.retry_after_ms {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(ms.div_ceil(1000)));
    }
    response
}

/// A body made of chunks sent as they are (hyper writes them vectored), with its exact
/// length, so the response carries a Content-Length.
struct Chunks {
    chunks: std::collections::VecDeque<bytes::Bytes>,
    left: u64,
}

impl http_body::Body for Chunks {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        let next = self.chunks.pop_front();
        if let Some(chunk) = &next {
            self.left -= chunk.len() as u64;
        }
        std::task::Poll::Ready(next.map(|c| Ok(http_body::Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.left)
    }
}

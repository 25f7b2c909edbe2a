//! The handshake era (2025-03-26 … 2025-11-25): `initialize`, sessions bound to their
//! principal, batches for 2025-03-26, DELETE to end a session.

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use toolgate_domain::Caller;
use toolgate_domain::audit::{AuditEvent, AuditOutcome, TargetType};

use super::call::{self, Era};
use super::headers::header;
use super::jsonrpc::{self as rpc, Message};
use super::router::{Method, invalid_log_level, list_tools, method_not_found};
use super::sessions::{Session, SessionCap};
use super::{DEFAULT_VERSION, HANDSHAKE_VERSIONS, INSTRUCTIONS, McpServer, Reply};

/// 404 with -32007 and the A4 data: unknown, expired, ended and another principal's sessions
/// read alike (no oracle).
pub(super) fn session_not_found(server: &McpServer, id: &Value, message: &str) -> Reply {
    let data = json!({
        "correlation_id": server.correlation_id(),
        "retry_after_ms": null,
        "remediation": "initialize again for a new Mcp-Session-Id, or call without a session (sessions are optional)",
    });
    Reply::error(StatusCode::NOT_FOUND, id, rpc::SESSION_NOT_FOUND, message, Some(data))
}

/// The session named by `Mcp-Session-Id`, if any: `Err` is the 404 for an unknown one.
async fn session(
    server: &McpServer,
    caller: &Caller,
    headers: &HeaderMap,
    id: &Value,
) -> Result<Option<Session>, Reply> {
    let Some(sid) = header(headers, super::headers::SESSION_ID) else { return Ok(None) };
    match server.find_session(sid, &caller.principal.name).await {
        Some(session) => Ok(Some(session)),
        None => Err(session_not_found(server, id, "session not found: it expired or was ended; initialize again")),
    }
}

pub async fn handle(
    server: &Arc<McpServer>,
    caller: &Caller,
    headers: &HeaderMap,
    header_version: Option<&str>,
    message: Message,
) -> Reply {
    let (id, method, params) = match message {
        Message::Response { id, outcome } => {
            if let Err(reply) = session(server, caller, headers, &Value::Null).await {
                return reply;
            }
            // The answer to a question a handler sent on its call's stream.
            let answered = match header(headers, super::headers::SESSION_ID) {
                Some(sid) => server.take_answer(sid, &id, outcome).await,
                None => false,
            };
            if !answered {
                tracing::info!(request = %id, "a client response that no call is waiting for (late or unknown)");
            }
            return Reply::accepted();
        }
        Message::Notification { method, params } => {
            if let Err(reply) = session(server, caller, headers, &Value::Null).await {
                return reply;
            }
            // A cancellation names a request of the same session; anything else is noted.
            if method == "notifications/cancelled"
                && let (Some(sid), Some(request_id)) =
                    (header(headers, super::headers::SESSION_ID), params.as_ref().and_then(|p| p.get("requestId")))
                && server.in_flight.cancel(sid, request_id)
            {
                tracing::info!(session = sid, request = %request_id, "the client cancelled a call");
            }
            return Reply::accepted();
        }
        Message::Request { id, method, params } => (id, method, params),
    };
    if method == "initialize" {
        return initialize(server, caller, &id, params.as_ref()).await;
    }
    let session = match session(server, caller, headers, &id).await {
        Ok(s) => s,
        Err(reply) => return reply,
    };
    let version = header_version
        .map(str::to_string)
        .or(session.as_ref().map(|s| s.version.clone()))
        .unwrap_or_else(|| DEFAULT_VERSION.into());
    match Method::parse(&method) {
        Some(Method::Ping) => Reply::json(StatusCode::OK, rpc::result_raw(&id, "{}")),
        Some(Method::ToolsList) => list_tools(server, caller, &id, params.as_ref(), false),
        Some(Method::ToolsCall) => {
            let era = Era {
                stateless: false,
                version,
                client_capabilities: session.as_ref().map(|s| s.client_capabilities.clone()),
            };
            let in_flight = match header(headers, super::headers::SESSION_ID) {
                Some(sid) => match server.in_flight.register(sid, &id, &server.shutdown) {
                    Some(registered) => Some(registered),
                    None => {
                        let message = format!("request id {id} is already in flight in this session: use a new id");
                        return Reply::error(StatusCode::CONFLICT, &id, rpc::INVALID_REQUEST, &message, None);
                    }
                },
                None => None,
            };
            let log_level = session.as_ref().and_then(|s| s.log_level);
            let session_id =
                header(headers, super::headers::SESSION_ID).filter(|_| session.is_some()).map(str::to_string);
            let ring = session.as_ref().map(|s| s.ring.clone());
            let in_session = call::InSession { in_flight, log_level, session_id, ring };
            call::tools_call(server, caller, headers, &id, params, &era, in_session).await
        }
        Some(Method::LoggingSetLevel) => set_log_level(server, caller, headers, &id, params.as_ref()),
        Some(m @ (Method::ResourcesSubscribe | Method::ResourcesUnsubscribe)) => {
            let session_id = header(headers, super::headers::SESSION_ID).filter(|_| session.is_some());
            let on = m == Method::ResourcesSubscribe;
            super::resources::subscription(server, caller, &id, params.as_ref(), session_id, on)
        }
        Some(Method::ServerDiscover | Method::TasksGet | Method::TasksUpdate | Method::TasksCancel) | None => {
            method_not_found(StatusCode::OK, &id, &method)
        }
        Some(other) => {
            let era = Era {
                stateless: false,
                version,
                client_capabilities: session.as_ref().map(|s| s.client_capabilities.clone()),
            };
            match super::router::surface_method(server, caller, &id, other, params, &era).await {
                Some(reply) => reply,
                None => method_not_found(StatusCode::OK, &id, &method),
            }
        }
    }
}

/// `logging/setLevel`: the level of the log lines this session's calls send (on their SSE
/// answers). A level lives in a session; without one there is nowhere to keep it.
fn set_log_level(
    server: &McpServer,
    caller: &Caller,
    headers: &HeaderMap,
    id: &Value,
    params: Option<&Value>,
) -> Reply {
    let level = params.and_then(|p| p.get("level")).cloned().unwrap_or(Value::Null);
    let Some(parsed) = level.as_str().and_then(toolgate_domain::LogLevel::parse) else {
        return invalid_log_level(StatusCode::OK, id, &level);
    };
    match header(headers, super::headers::SESSION_ID) {
        Some(sid) if server.sessions.set_log_level(sid, &caller.principal.name, parsed) => {
            Reply::json(StatusCode::OK, rpc::result_raw(id, "{}"))
        }
        Some(_) => session_not_found(server, id, "session not found: it expired or was ended; initialize again"),
        None => Reply::error(
            StatusCode::OK,
            id,
            rpc::INVALID_REQUEST,
            "logging/setLevel needs a session: initialize first and send its Mcp-Session-Id",
            None,
        ),
    }
}

async fn initialize(server: &McpServer, caller: &Caller, id: &Value, params: Option<&Value>) -> Reply {
    if server.shutdown.is_cancelled() {
        let data = json!({"correlation_id": server.correlation_id(), "retry_after_ms": 1000,
                          "remediation": "the server is stopping: connect again once it (or another replica) is up"});
        return Reply::error(
            StatusCode::SERVICE_UNAVAILABLE,
            id,
            rpc::SHUTTING_DOWN,
            "the server is shutting down",
            Some(data),
        );
    }
    let requested = params.and_then(|p| p.get("protocolVersion")).and_then(Value::as_str);
    // A version we speak is echoed; any other is answered with our latest (not an error).
    let version = match requested {
        Some(v) if HANDSHAKE_VERSIONS.contains(&v) => v,
        _ => HANDSHAKE_VERSIONS[HANDSHAKE_VERSIONS.len() - 1],
    };
    let capabilities = params.and_then(|p| p.get("capabilities")).cloned().unwrap_or(json!({}));
    // Behind a buffering proxy (--mcp-no-streaming) no session is minted: nothing could be
    // streamed on it, and every call works without one.
    if server.options.streams.plain_json_only {
        let result = server_description(server, version, false);
        return Reply::json(StatusCode::OK, rpc::result(id, &result));
    }
    let session_id =
        match server.sessions.create(&caller.principal.name, version, capabilities.clone(), server.now_ms()) {
            Ok(id) => id,
            Err(cap) => return session_cap_full(server, caller, id, cap),
        };
    server.share_session(&session_id, &caller.principal.name, version, &capabilities).await;
    audit_session(server, caller, "session.open", &session_id);
    crate::metrics::session_opened();
    let result = server_description(server, version, true);
    Reply { session_id: Some(session_id), ..Reply::json(StatusCode::OK, rpc::result(id, &result)) }
}

/// initialize's result. Subscriptions and log levels live in a session: a server that mints
/// none (`--mcp-no-streaming`) does not offer them.
fn server_description(server: &McpServer, version: &str, in_session: bool) -> Value {
    let mut capabilities = json!({
        "tools": {"listChanged": false},
        "prompts": {"listChanged": false},
        "resources": {"subscribe": in_session, "listChanged": false},
        "completions": {},
    });
    if in_session {
        capabilities["logging"] = json!({});
    }
    json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": server.server_info,
        "instructions": INSTRUCTIONS,
    })
}

pub async fn batch(
    server: &Arc<McpServer>,
    caller: &Caller,
    headers: &HeaderMap,
    header_version: Option<&str>,
    items: Vec<Result<Message, (Value, rpc::FramingError)>>,
) -> Reply {
    let version = header_version.unwrap_or(DEFAULT_VERSION);
    if version != DEFAULT_VERSION {
        return Reply::error(
            StatusCode::BAD_REQUEST,
            &Value::Null,
            rpc::INVALID_REQUEST,
            &format!(
                "JSON-RPC batches are accepted only for protocol 2025-03-26 (this request is {version}); send one message per POST"
            ),
            None,
        );
    }
    // A batch is answered as one JSON array: its calls never stream.
    let mut headers = headers.clone();
    headers.insert(axum::http::header::ACCEPT, axum::http::HeaderValue::from_static("application/json"));
    let headers = &headers;
    let mut responses = Vec::new();
    // Once the answers reach the cap, the remaining requests are not run (notifications still
    // are: they add nothing to the answer).
    let cap = server.options.answers.max_batch_bytes;
    let mut answered_bytes = 0;
    for item in items {
        let reply = match item {
            Err((id, e)) => Reply::error(StatusCode::OK, &id, e.code, &e.message, None),
            Ok(Message::Request { id, method, .. }) if method == "initialize" => {
                Reply::error(StatusCode::OK, &id, rpc::INVALID_REQUEST, "initialize must not be sent in a batch", None)
            }
            Ok(Message::Request { id, .. }) if answered_bytes >= cap => {
                let message = format!(
                    "not run: this batch's answers already reached {answered_bytes} bytes (the cap is {cap}); send this request again, in another batch or on its own"
                );
                Reply::error(StatusCode::OK, &id, rpc::INVALID_REQUEST, &message, None)
            }
            Ok(message) => Box::pin(handle(server, caller, headers, Some(DEFAULT_VERSION), message)).await,
        };
        if reply.status == StatusCode::NOT_FOUND {
            return reply;
        }
        if let Some(body) = reply.body {
            let text = body.into_text();
            answered_bytes += text.len();
            responses.push(text);
        }
    }
    if responses.is_empty() {
        Reply::accepted()
    } else {
        Reply::json(StatusCode::OK, format!("[{}]", responses.join(",")))
    }
}

impl McpServer {
    /// DELETE ends a handshake-era session (200), after which it is unknown (404).
    pub async fn end_session(&self, caller: &Caller, headers: &HeaderMap) -> Reply {
        match header(headers, super::headers::SESSION_ID) {
            None => Reply::error(
                StatusCode::METHOD_NOT_ALLOWED,
                &Value::Null,
                rpc::INVALID_REQUEST,
                "DELETE ends a session: send its Mcp-Session-Id",
                None,
            ),
            // A session another replica opened is taken in first, so that it can end here.
            Some(sid)
                if self.find_session(sid, &caller.principal.name).await.is_some()
                    && self.sessions.remove(sid, &caller.principal.name) =>
            {
                self.forget_shared_session(sid).await;
                self.in_flight.cancel_session(sid);
                audit_session(self, caller, "session.close", sid);
                Reply::json(StatusCode::OK, "{}".into())
            }
            Some(_) => session_not_found(self, &Value::Null, "session not found"),
        }
    }
}

/// 429 with -32010 and the A4 data: a live session is never evicted to make room.
fn session_cap_full(server: &McpServer, caller: &Caller, id: &Value, cap: SessionCap) -> Reply {
    let (message, remediation) = match cap {
        SessionCap::Principal(n) => (
            format!("session limit reached: this principal already has {n} live sessions"),
            "end a session you no longer use (DELETE with its Mcp-Session-Id), wait for an idle one to expire, or call without a session",
        ),
        SessionCap::Server(n) => (
            format!("session limit reached: the server holds {n} live sessions, the most it keeps"),
            "retry after idle sessions expire, or call without a session (sessions are optional)",
        ),
    };
    let correlation_id = server.correlation_id();
    server.record(
        AuditEvent::new(server.now_ms(), "session.open", AuditOutcome::Denied)
            .by(caller)
            .detail(message.clone())
            .correlation(correlation_id.clone()),
    );
    let data = json!({"correlation_id": correlation_id, "retry_after_ms": null, "remediation": remediation});
    Reply::error(StatusCode::TOO_MANY_REQUESTS, id, rpc::SESSION_LIMIT, &message, Some(data))
}

fn audit_session(server: &McpServer, caller: &Caller, action: &str, session_id: &str) {
    server.record(
        AuditEvent::new(server.now_ms(), action, AuditOutcome::Success)
            .by(caller)
            .target(TargetType::McpSession, session_id)
            .correlation(server.correlation_id()),
    );
}

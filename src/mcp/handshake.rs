//! The handshake era (2025-03-26 … 2025-11-25): `initialize`, sessions bound to their
//! principal, what a client sends back in one (its answers and notifications), its log
//! level, batches for 2025-03-26, DELETE to end a session. A leaf: the router calls in here,
//! never the other way.

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use toolgate_domain::Caller;
use toolgate_domain::audit::{AuditEvent, AuditOutcome, TargetType};

use super::era::InSession;
use super::headers::header;
use super::jsonrpc as rpc;
use super::sessions::SessionCap;
use super::{DEFAULT_VERSION, HANDSHAKE_VERSIONS, INSTRUCTIONS, McpServer, Reply};

/// 404 with -32007 and the refusal envelope: unknown, expired, ended and another principal's sessions
/// read alike (no oracle).
pub(super) fn session_not_found(server: &McpServer, id: &Value, message: &str) -> Reply {
    let data = json!({
        "correlation_id": server.correlation_id(),
        "retry_after_ms": null,
        "remediation": "initialize again for a new Mcp-Session-Id, or call without a session (sessions are optional)",
    });
    Reply::error(StatusCode::NOT_FOUND, id, rpc::SESSION_NOT_FOUND, message, Some(data))
}

/// The session named by `Mcp-Session-Id`, if any, as a request's era holds it: `Err` is the
/// 404 for an unknown one.
pub async fn session(
    server: &McpServer,
    caller: &Caller,
    headers: &HeaderMap,
    id: &Value,
) -> Result<Option<(InSession, String)>, Reply> {
    let Some(sid) = header(headers, super::headers::SESSION_ID) else { return Ok(None) };
    match server.find_session(sid, &caller.principal.name).await {
        Some(s) => {
            let session = InSession {
                id: sid.to_string(),
                capabilities: s.client_capabilities,
                log_level: s.log_level,
                ring: s.ring,
                toolsets: s.toolsets,
                enabled: s.enabled,
            };
            Ok(Some((session, s.version)))
        }
        None => Err(session_not_found(server, id, "session not found: it expired or was ended; initialize again")),
    }
}

/// A client's answer to a question a handler sent on its call's stream.
pub async fn on_response(
    server: &McpServer,
    caller: &Caller,
    headers: &HeaderMap,
    id: Value,
    outcome: Result<Value, Value>,
) -> Reply {
    if let Err(reply) = session(server, caller, headers, &Value::Null).await {
        return reply;
    }
    let answered = match header(headers, super::headers::SESSION_ID) {
        Some(sid) => server.take_answer(sid, &id, outcome).await,
        None => false,
    };
    if !answered {
        tracing::info!(request = %id, "a client response that no call is waiting for (late or unknown)");
    }
    Reply::accepted()
}

/// A client's notification: a cancellation names a request of the same session; anything
/// else is noted.
pub async fn on_notification(
    server: &McpServer,
    caller: &Caller,
    headers: &HeaderMap,
    method: &str,
    params: Option<&Value>,
) -> Reply {
    if let Err(reply) = session(server, caller, headers, &Value::Null).await {
        return reply;
    }
    if method == "notifications/cancelled"
        && let (Some(sid), Some(request_id)) =
            (header(headers, super::headers::SESSION_ID), params.and_then(|p| p.get("requestId")))
        && server.in_flight.cancel(sid, request_id)
    {
        tracing::info!(session = sid, request = %request_id, "the client cancelled a call");
    }
    Reply::accepted()
}

/// `logging/setLevel`: the level of the log lines this session's calls send (on their SSE
/// answers). A level lives in a session; without one there is nowhere to keep it.
pub fn set_log_level(
    server: &McpServer,
    caller: &Caller,
    headers: &HeaderMap,
    id: &Value,
    params: Option<&Value>,
) -> Reply {
    let level = params.and_then(|p| p.get("level")).cloned().unwrap_or(Value::Null);
    let Some(parsed) = level.as_str().and_then(toolgate_domain::LogLevel::parse) else {
        return Reply::invalid_log_level(StatusCode::OK, id, &level);
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

pub async fn initialize(
    server: &McpServer,
    caller: &Caller,
    headers: &HeaderMap,
    id: &Value,
    params: Option<&Value>,
) -> Reply {
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
    // Checked by dispatch before any method ran.
    let chosen = super::chosen::requested(server.services.catalogue(), caller, headers).ok().flatten();
    server.sessions.choose(&session_id, chosen);
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
        // A session's list grows with enable_toolset, announced on its GET stream.
        "tools": {"listChanged": in_session && !server.services.catalogue().toolsets.is_empty()},
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

/// A batch's answers as they are gathered (2025-03-26 only): one JSON array, never a stream;
/// once the answers reach `--max-batch-answer-bytes` the remaining requests are not run.
pub struct Batch {
    responses: Vec<String>,
    answered_bytes: usize,
    cap: usize,
}

impl Batch {
    /// The batch's answers to come, or the 400 for a revision without batches.
    pub fn open(server: &McpServer, header_version: Option<&str>) -> Result<Self, Reply> {
        let version = header_version.unwrap_or(DEFAULT_VERSION);
        if version != DEFAULT_VERSION {
            return Err(Reply::error(
                StatusCode::BAD_REQUEST,
                &Value::Null,
                rpc::INVALID_REQUEST,
                &format!(
                    "JSON-RPC batches are accepted only for protocol 2025-03-26 (this request is {version}); send one message per POST"
                ),
                None,
            ));
        }
        Ok(Self { responses: Vec::new(), answered_bytes: 0, cap: server.options.answers.max_batch_bytes })
    }

    /// A batch is answered as one JSON array: its calls never stream.
    pub fn headers(headers: &HeaderMap) -> HeaderMap {
        let mut headers = headers.clone();
        headers.insert(axum::http::header::ACCEPT, axum::http::HeaderValue::from_static("application/json"));
        headers
    }

    /// The answer of a request that is not run: `initialize` (never in a batch), or any once
    /// the answers reached the cap (notifications still run: they add nothing to the answer).
    pub fn refusal(&self, id: &Value, method: &str) -> Option<Reply> {
        if method == "initialize" {
            let message = "initialize must not be sent in a batch";
            return Some(Reply::error(StatusCode::OK, id, rpc::INVALID_REQUEST, message, None));
        }
        (self.answered_bytes >= self.cap).then(|| {
            let message = format!(
                "not run: this batch's answers already reached {} bytes (the cap is {}); send this request again, in another batch or on its own",
                self.answered_bytes, self.cap
            );
            Reply::error(StatusCode::OK, id, rpc::INVALID_REQUEST, &message, None)
        })
    }

    /// Adds one item's reply; `Err` is a reply that ends the whole batch (an unknown session).
    pub fn push(&mut self, reply: Reply) -> Result<(), Reply> {
        if reply.status == StatusCode::NOT_FOUND {
            return Err(reply);
        }
        if let Some(body) = reply.body {
            let text = body.into_text();
            self.answered_bytes += text.len();
            self.responses.push(text);
        }
        Ok(())
    }

    pub fn finish(self) -> Reply {
        if self.responses.is_empty() {
            Reply::accepted()
        } else {
            Reply::json(StatusCode::OK, format!("[{}]", self.responses.join(",")))
        }
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

/// 429 with -32010 and the refusal envelope: a live session is never evicted to make room.
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

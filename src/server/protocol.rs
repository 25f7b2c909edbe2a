//! MCP methods over both eras. The era is chosen per request: a request carrying
//! `_meta["io.modelcontextprotocol/protocolVersion"]`, or an `MCP-Protocol-Version` header that
//! is not a handshake revision, is stateless (2026-07-28); everything else is the handshake
//! era (2025-03-26 … 2025-11-25), with optional sessions.

use axum::http::{HeaderMap, StatusCode};
use base64::Engine as _;
use serde_json::{Value, json};

use super::jsonrpc::{self as rpc, Body, Message};
use super::{AppState, DEFAULT_VERSION, HANDSHAKE_VERSIONS, LIST_TTL_MS, STATELESS_VERSIONS, call};
use crate::registry::Tier;
use crate::store::{PrincipalRecord, TokenRecord};

pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// Handshake-era code for an unknown session (implementation-defined range).
const SESSION_NOT_FOUND: i64 = -32001;
const INSTRUCTIONS: &str = "toolgate serves a reviewed, policy-checked tool catalogue. Each tool's annotations are enforced: \
     a refused call says which tier or permission is needed. discover_permissions lists what this token may do.";

/// The authenticated caller.
#[derive(Clone, Debug)]
pub struct Caller {
    pub principal: PrincipalRecord,
    pub token: TokenRecord,
    /// `None` when the token's tier is not one policy.yaml declares: it may do nothing.
    pub tier: Option<Tier>,
    pub tier_name: String,
}

/// What goes back over HTTP.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Option<String>,
    pub session_id: Option<String>,
}

impl Reply {
    pub fn json(status: StatusCode, body: String) -> Self {
        Self { status, body: Some(body), session_id: None }
    }

    pub fn accepted() -> Self {
        Self { status: StatusCode::ACCEPTED, body: None, session_id: None }
    }

    pub fn error(status: StatusCode, id: &Value, code: i64, message: &str, data: Option<Value>) -> Self {
        Self::json(status, rpc::error(id, code, message, data))
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}").trim())
}

pub async fn handle(state: &AppState, caller: &Caller, headers: &HeaderMap, bytes: &[u8]) -> Reply {
    let header_version = header(headers, "mcp-protocol-version");
    let body = match rpc::parse(bytes) {
        Ok(body) => body,
        Err(e) => return Reply::error(StatusCode::BAD_REQUEST, &Value::Null, e.code, &e.message, None),
    };
    match body {
        Body::Batch(items) => batch(state, caller, headers, header_version, items).await,
        Body::Single(Err((id, e))) => Reply::error(StatusCode::BAD_REQUEST, &id, e.code, &e.message, None),
        Body::Single(Ok(message)) => {
            let params = match &message {
                Message::Request { params, .. } | Message::Notification { params, .. } => params.as_ref(),
                Message::Response => None,
            };
            let stateless_meta =
                params.and_then(|p| p.get("_meta")).is_some_and(|m| m.get(META_PROTOCOL_VERSION).is_some());
            let stateless_header = header_version.is_some_and(|h| !HANDSHAKE_VERSIONS.contains(&h));
            if stateless_meta || stateless_header {
                stateless(state, caller, headers, header_version, message).await
            } else {
                handshake(state, caller, headers, header_version, message).await
            }
        }
    }
}

// ---------------------------------------------------------------- handshake era

/// The session named by `Mcp-Session-Id`, if any: `Err` is the 404 for an unknown one.
fn session(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    id: &Value,
) -> Result<Option<super::sessions::Session>, Reply> {
    match header(headers, "mcp-session-id") {
        None => Ok(None),
        Some(sid) => {
            state.sessions.touch(sid, &caller.principal.name, state.clock.now_ms()).map(Some).ok_or_else(|| {
                Reply::error(
                    StatusCode::NOT_FOUND,
                    id,
                    SESSION_NOT_FOUND,
                    "session not found: it expired or was ended; initialize again",
                    None,
                )
            })
        }
    }
}

async fn handshake(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    header_version: Option<&str>,
    message: Message,
) -> Reply {
    let (id, method, params) = match message {
        Message::Response | Message::Notification { .. } => {
            if let Err(reply) = session(state, caller, headers, &Value::Null) {
                return reply;
            }
            return Reply::accepted();
        }
        Message::Request { id, method, params } => (id, method, params),
    };
    if method == "initialize" {
        return initialize(state, caller, &id, params.as_ref());
    }
    let session = match session(state, caller, headers, &id) {
        Ok(s) => s,
        Err(reply) => return reply,
    };
    let version = header_version
        .map(str::to_string)
        .or(session.as_ref().map(|s| s.version.clone()))
        .unwrap_or_else(|| DEFAULT_VERSION.into());
    match method.as_str() {
        "ping" => Reply::json(StatusCode::OK, rpc::result_raw(&id, "{}")),
        "tools/list" => list_tools(state, caller, &id, params.as_ref(), false),
        "tools/call" => {
            let capabilities = session.map(|s| s.client_capabilities);
            let era = call::Era { stateless: false, version, client_capabilities: capabilities };
            call::tools_call(state, caller, headers, &id, params, &era).await
        }
        other => Reply::error(StatusCode::OK, &id, rpc::METHOD_NOT_FOUND, &format!("Method not found: {other}"), None),
    }
}

fn initialize(state: &AppState, caller: &Caller, id: &Value, params: Option<&Value>) -> Reply {
    let requested = params.and_then(|p| p.get("protocolVersion")).and_then(Value::as_str);
    // A version we speak is echoed; any other is answered with our latest (not an error).
    let version = match requested {
        Some(v) if HANDSHAKE_VERSIONS.contains(&v) => v,
        _ => HANDSHAKE_VERSIONS[HANDSHAKE_VERSIONS.len() - 1],
    };
    let capabilities = params.and_then(|p| p.get("capabilities")).cloned().unwrap_or(json!({}));
    let session_id = state.sessions.create(&caller.principal.name, version, capabilities, state.clock.now_ms());
    audit_session(state, caller, "session.open", &session_id);
    let result = json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": state.server_info,
        "instructions": INSTRUCTIONS,
    });
    Reply { status: StatusCode::OK, body: Some(rpc::result(id, &result)), session_id: Some(session_id) }
}

async fn batch(
    state: &AppState,
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
    let mut responses = Vec::new();
    for item in items {
        let reply = match item {
            Err((id, e)) => Reply::error(StatusCode::OK, &id, e.code, &e.message, None),
            Ok(Message::Request { id, method, .. }) if method == "initialize" => {
                Reply::error(StatusCode::OK, &id, rpc::INVALID_REQUEST, "initialize must not be sent in a batch", None)
            }
            Ok(message) => Box::pin(handshake(state, caller, headers, Some(DEFAULT_VERSION), message)).await,
        };
        if reply.status == StatusCode::NOT_FOUND {
            return reply;
        }
        if let Some(body) = reply.body {
            responses.push(body);
        }
    }
    if responses.is_empty() {
        Reply::accepted()
    } else {
        Reply::json(StatusCode::OK, format!("[{}]", responses.join(",")))
    }
}

/// DELETE ends a handshake-era session (200), after which it is unknown (404).
pub fn end_session(state: &AppState, caller: &Caller, headers: &HeaderMap) -> Reply {
    match header(headers, "mcp-session-id") {
        None => Reply::error(
            StatusCode::METHOD_NOT_ALLOWED,
            &Value::Null,
            rpc::INVALID_REQUEST,
            "DELETE ends a session: send its Mcp-Session-Id",
            None,
        ),
        Some(sid) if state.sessions.remove(sid, &caller.principal.name) => {
            audit_session(state, caller, "session.close", sid);
            Reply::json(StatusCode::OK, "{}".into())
        }
        Some(_) => Reply::error(StatusCode::NOT_FOUND, &Value::Null, SESSION_NOT_FOUND, "session not found", None),
    }
}

fn audit_session(state: &AppState, caller: &Caller, action: &str, session_id: &str) {
    state.audit.record(crate::store::AuditEntry {
        at_ms: state.clock.now_ms(),
        principal: Some(caller.principal.name.clone()),
        token_id: Some(caller.token.id.clone()),
        action: action.into(),
        target: Some(session_id.into()),
        result: "success".into(),
        detail: None,
        correlation_id: Some(state.correlation_id()),
    });
}

// ---------------------------------------------------------------- both eras

fn list_tools(state: &AppState, caller: &Caller, id: &Value, params: Option<&Value>, stateless: bool) -> Reply {
    if params.and_then(|p| p.get("cursor")).is_some_and(|c| !c.is_null()) {
        let status = if stateless { StatusCode::BAD_REQUEST } else { StatusCode::OK };
        return Reply::error(
            status,
            id,
            rpc::INVALID_PARAMS,
            "invalid cursor: tools/list has a single page and hands out no cursors",
            None,
        );
    }
    let lists = state.list_for(caller.tier);
    Reply::json(StatusCode::OK, rpc::result_raw(id, if stateless { &lists.stateless } else { &lists.handshake }))
}

// ---------------------------------------------------------------- stateless era

/// Decodes `=?base64?…?=` strictly; any other value is literal.
pub fn header_value(raw: &str) -> Result<String, ()> {
    match raw.strip_prefix("=?base64?").and_then(|r| r.strip_suffix("?=")) {
        Some(encoded) => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).map_err(|_| ())?;
            String::from_utf8(bytes).map_err(|_| ())
        }
        None => Ok(raw.to_string()),
    }
}

fn mismatch(id: &Value, message: String) -> Reply {
    Reply::error(StatusCode::BAD_REQUEST, id, rpc::HEADER_MISMATCH, &message, None)
}

async fn stateless(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    header_version: Option<&str>,
    message: Message,
) -> Reply {
    let (id, method, params) = match message {
        Message::Response | Message::Notification { .. } => return Reply::accepted(),
        Message::Request { id, method, params } => (id, method, params),
    };
    let meta = params.as_ref().and_then(|p| p.get("_meta")).and_then(Value::as_object);
    let version = meta.and_then(|m| m.get(META_PROTOCOL_VERSION)).and_then(Value::as_str);
    let capabilities = meta.and_then(|m| m.get(META_CLIENT_CAPABILITIES)).filter(|c| c.is_object());
    let (Some(version), Some(capabilities)) = (version, capabilities) else {
        return Reply::error(
            StatusCode::BAD_REQUEST,
            &id,
            rpc::INVALID_PARAMS,
            &format!(
                "params._meta needs `{META_PROTOCOL_VERSION}` (a string) and `{META_CLIENT_CAPABILITIES}` (an object)"
            ),
            None,
        );
    };
    match header_version {
        Some(h) if h == version => {}
        Some(h) => {
            return mismatch(
                &id,
                format!("MCP-Protocol-Version `{h}` does not match _meta protocolVersion `{version}`"),
            );
        }
        None => {
            return mismatch(
                &id,
                "the MCP-Protocol-Version header is required and must equal _meta protocolVersion".into(),
            );
        }
    }
    match header(headers, "mcp-method") {
        Some(m) if m == method => {}
        Some(m) => return mismatch(&id, format!("Mcp-Method `{m}` does not match the body's method `{method}`")),
        None => return mismatch(&id, format!("the Mcp-Method header is required (`{method}`)")),
    }
    let named = match method.as_str() {
        "tools/call" | "prompts/get" => params.as_ref().and_then(|p| p.get("name")).and_then(Value::as_str),
        "resources/read" => params.as_ref().and_then(|p| p.get("uri")).and_then(Value::as_str),
        _ => None,
    };
    if let Some(name) = named {
        match header(headers, "mcp-name").map(header_value) {
            Some(Ok(h)) if h.trim() == name => {}
            Some(Ok(h)) => return mismatch(&id, format!("Mcp-Name `{h}` does not match `{name}`")),
            Some(Err(())) => return mismatch(&id, "Mcp-Name is not valid (bad characters or base64)".into()),
            None => return mismatch(&id, format!("the Mcp-Name header is required (`{name}`)")),
        }
    }
    if !STATELESS_VERSIONS.contains(&version) {
        return Reply::error(
            StatusCode::BAD_REQUEST,
            &id,
            rpc::UNSUPPORTED_PROTOCOL_VERSION,
            &format!("unsupported protocol version `{version}`"),
            Some(json!({"supported": STATELESS_VERSIONS, "requested": version})),
        );
    }
    match method.as_str() {
        "server/discover" => {
            let result = json!({
                "resultType": "complete",
                "supportedVersions": STATELESS_VERSIONS,
                "capabilities": {"tools": {}},
                "instructions": INSTRUCTIONS,
                "ttlMs": LIST_TTL_MS,
                "cacheScope": "public",
                "_meta": {META_SERVER_INFO: state.server_info},
            });
            Reply::json(StatusCode::OK, rpc::result(&id, &result))
        }
        "tools/list" => list_tools(state, caller, &id, params.as_ref(), true),
        "tools/call" => {
            let era = call::Era {
                stateless: true,
                version: version.to_string(),
                client_capabilities: Some(capabilities.clone()),
            };
            call::tools_call(state, caller, headers, &id, params, &era).await
        }
        other => {
            Reply::error(StatusCode::NOT_FOUND, &id, rpc::METHOD_NOT_FOUND, &format!("Method not found: {other}"), None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_sentinel_is_strict() {
        assert_eq!(header_value("=?base64?SGVsbG8=?="), Ok("Hello".into()));
        assert!(header_value("=?base64?SGVsbG8?=").is_err());
        assert!(header_value("=?base64?SGVs!!!bG8=?=").is_err());
        assert_eq!(header_value("SGVsbG8="), Ok("SGVsbG8=".into()));
        assert_eq!(header_value("=?base64?SGVsbG8="), Ok("=?base64?SGVsbG8=".into()));
    }
}

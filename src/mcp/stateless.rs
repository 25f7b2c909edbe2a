//! The stateless era (2026-07-28): every request carries its version and capabilities in
//! `_meta`, mirrored in headers that must agree with the body; no sessions, no initialize.
//! A leaf: the era is read here, the methods are answered elsewhere.

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use toolgate_domain::LogLevel;

use super::era::Era;
use super::headers::{header, header_value};
use super::jsonrpc as rpc;
use super::{
    INSTRUCTIONS, LIST_TTL_MS, META_CLIENT_CAPABILITIES, META_LOG_LEVEL, META_PROTOCOL_VERSION, META_SERVER_INFO,
    McpServer, Reply, STATELESS_VERSIONS,
};

fn mismatch(id: &Value, message: String) -> Reply {
    Reply::error(StatusCode::BAD_REQUEST, id, rpc::HEADER_MISMATCH, &message, None)
}

/// The headers must say what the body says: version, method and the named tool or resource.
fn check_headers(
    headers: &HeaderMap,
    header_version: Option<&str>,
    id: &Value,
    version: &str,
    method: &str,
    params: Option<&Value>,
) -> Result<(), Reply> {
    match header_version {
        Some(h) if h == version => {}
        Some(h) => {
            return Err(mismatch(
                id,
                format!("MCP-Protocol-Version `{h}` does not match _meta protocolVersion `{version}`"),
            ));
        }
        None => {
            return Err(mismatch(
                id,
                "the MCP-Protocol-Version header is required and must equal _meta protocolVersion".into(),
            ));
        }
    }
    match header(headers, super::headers::MCP_METHOD) {
        Some(m) if m == method => {}
        Some(m) => return Err(mismatch(id, format!("Mcp-Method `{m}` does not match the body's method `{method}`"))),
        None => return Err(mismatch(id, format!("the Mcp-Method header is required (`{method}`)"))),
    }
    let named = match method {
        "tools/call" | "prompts/get" => params.and_then(|p| p.get("name")).and_then(Value::as_str),
        "resources/read" => params.and_then(|p| p.get("uri")).and_then(Value::as_str),
        "tasks/get" | "tasks/update" | "tasks/cancel" => params.and_then(|p| p.get("taskId")).and_then(Value::as_str),
        _ => None,
    };
    if let Some(name) = named {
        match header(headers, super::headers::MCP_NAME).map(header_value) {
            Some(Ok(h)) if h.trim() == name => {}
            Some(Ok(h)) => return Err(mismatch(id, format!("Mcp-Name `{h}` does not match `{name}`"))),
            Some(Err(_)) => return Err(mismatch(id, "Mcp-Name is not valid (bad characters or base64)".into())),
            None => return Err(mismatch(id, format!("the Mcp-Name header is required (`{name}`)"))),
        }
    }
    Ok(())
}

/// The era of a 2026-07-28 request: its `_meta` version and capabilities (and log level),
/// checked against its headers, or the refusal.
pub fn era_of(
    headers: &HeaderMap,
    header_version: Option<&str>,
    id: &Value,
    method: &str,
    params: Option<&Value>,
) -> Result<Era, Reply> {
    let meta = params.and_then(|p| p.get("_meta")).and_then(Value::as_object);
    let version = meta.and_then(|m| m.get(META_PROTOCOL_VERSION)).and_then(Value::as_str);
    let capabilities = meta.and_then(|m| m.get(META_CLIENT_CAPABILITIES)).filter(|c| c.is_object());
    let (Some(version), Some(capabilities)) = (version, capabilities) else {
        return Err(Reply::error(
            StatusCode::BAD_REQUEST,
            id,
            rpc::INVALID_PARAMS,
            &format!(
                "params._meta needs `{META_PROTOCOL_VERSION}` (a string) and `{META_CLIENT_CAPABILITIES}` (an object)"
            ),
            None,
        ));
    };
    check_headers(headers, header_version, id, version, method, params)?;
    if !STATELESS_VERSIONS.contains(&version) {
        return Err(Reply::error(
            StatusCode::BAD_REQUEST,
            id,
            rpc::UNSUPPORTED_PROTOCOL_VERSION,
            &format!("unsupported protocol version `{version}`"),
            Some(json!({"supported": STATELESS_VERSIONS, "requested": version})),
        ));
    }
    // A level asked for in `_meta` is for tools/call's log lines; a bad one is refused there.
    let log_level = match meta.and_then(|m| m.get(META_LOG_LEVEL)) {
        Some(level) if method == "tools/call" => match level.as_str().and_then(LogLevel::parse) {
            Some(level) => Some(level),
            None => return Err(Reply::invalid_log_level(StatusCode::BAD_REQUEST, id, level)),
        },
        _ => None,
    };
    Ok(Era::Stateless { version: version.to_string(), capabilities: capabilities.clone(), log_level })
}

/// `server/discover`: what this server speaks and offers. Resources are followed with
/// `subscriptions/listen`, a stream: not from a server that answers plain JSON only.
pub fn discover(server: &McpServer, id: &Value) -> Reply {
    let streams = !server.options.streams.plain_json_only;
    let result = json!({
        "resultType": "complete",
        "supportedVersions": STATELESS_VERSIONS,
        "capabilities": {"tools": {}, "prompts": {}, "resources": {"subscribe": streams}, "completions": {},
                         "extensions": {super::tasks::EXTENSION: {}}},
        "instructions": INSTRUCTIONS,
        "ttlMs": LIST_TTL_MS,
        "cacheScope": "public",
        "_meta": {META_SERVER_INFO: server.server_info},
    });
    Reply::json(StatusCode::OK, rpc::result(id, &result))
}

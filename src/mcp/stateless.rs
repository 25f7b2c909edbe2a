//! The stateless era (2026-07-28): every request carries its version and capabilities in
//! `_meta`, mirrored in headers that must agree with the body; no sessions, no initialize.

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use toolgate_domain::{Caller, LogLevel};

use super::call::{self, Era};
use super::headers::{header, header_value};
use super::jsonrpc::{self as rpc, Message};
use super::router::{Method, invalid_log_level, list_tools, method_not_found};
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

pub async fn handle(
    server: &Arc<McpServer>,
    caller: &Caller,
    headers: &HeaderMap,
    header_version: Option<&str>,
    message: Message,
) -> Reply {
    let (id, method, params) = match message {
        Message::Response { .. } | Message::Notification { .. } => return Reply::accepted(),
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
    if let Err(reply) = check_headers(headers, header_version, &id, version, &method, params.as_ref()) {
        return reply;
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
    match Method::parse(&method) {
        Some(Method::ServerDiscover) => {
            let result = json!({
                "resultType": "complete",
                "supportedVersions": STATELESS_VERSIONS,
                "capabilities": {"tools": {}, "prompts": {}, "resources": {}, "completions": {},
                                 "extensions": {super::tasks::EXTENSION: {}}},
                "instructions": INSTRUCTIONS,
                "ttlMs": LIST_TTL_MS,
                "cacheScope": "public",
                "_meta": {META_SERVER_INFO: server.server_info},
            });
            Reply::json(StatusCode::OK, rpc::result(&id, &result))
        }
        Some(Method::ToolsList) => list_tools(server, caller, &id, params.as_ref(), true),
        Some(Method::ToolsCall) => {
            let era =
                Era { stateless: true, version: version.to_string(), client_capabilities: Some(capabilities.clone()) };
            let log_level = match meta.and_then(|m| m.get(META_LOG_LEVEL)) {
                None => None,
                Some(level) => match level.as_str().and_then(LogLevel::parse) {
                    Some(level) => Some(level),
                    None => return invalid_log_level(StatusCode::BAD_REQUEST, &id, level),
                },
            };
            let session = call::InSession { in_flight: None, log_level, session_id: None, ring: None };
            call::tools_call(server, caller, headers, &id, params, &era, session).await
        }
        Some(method @ (Method::TasksGet | Method::TasksUpdate | Method::TasksCancel)) => {
            super::tasks::answer(server, caller, &id, method, params.as_ref(), Some(capabilities))
        }
        // Removed in 2026-07-28 (ping, subscriptions among them), or never known: 404 with -32601.
        Some(Method::Ping | Method::LoggingSetLevel | Method::ResourcesSubscribe | Method::ResourcesUnsubscribe)
        | None => method_not_found(StatusCode::NOT_FOUND, &id, &method),
        Some(other) => {
            let era =
                Era { stateless: true, version: version.to_string(), client_capabilities: Some(capabilities.clone()) };
            match super::router::surface_method(server, caller, &id, other, params, &era).await {
                Some(reply) => reply,
                None => method_not_found(StatusCode::NOT_FOUND, &id, &method),
            }
        }
    }
}

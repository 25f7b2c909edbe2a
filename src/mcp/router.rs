//! The method router. The era is chosen per request: a request carrying
//! `_meta["io.modelcontextprotocol/protocolVersion"]`, or an `MCP-Protocol-Version` header that
//! is not a handshake revision, is stateless (2026-07-28); everything else is the handshake
//! era (2025-03-26 … 2025-11-25), with optional sessions.

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use serde_json::Value;
use toolgate_domain::Caller;

use super::jsonrpc::{self as rpc, Body, Message};
use super::{HANDSHAKE_VERSIONS, META_PROTOCOL_VERSION, McpServer, Reply, headers::header};

/// The methods toolgate answers, in either era. A new method is a variant here and an arm in
/// each era that serves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Ping,
    ServerDiscover,
    ToolsList,
    ToolsCall,
    PromptsList,
    PromptsGet,
    ResourcesList,
    ResourcesTemplatesList,
    ResourcesRead,
    /// Handshake era only (2026-07-28 removed them).
    ResourcesSubscribe,
    ResourcesUnsubscribe,
    CompletionComplete,
    /// Handshake era only (2026-07-28 asks for a level in each request's `_meta`).
    LoggingSetLevel,
    /// 2026-07-28's tasks extension only.
    TasksGet,
    TasksUpdate,
    TasksCancel,
}

/// How many methods the router knows.
pub const METHOD_COUNT: usize = 16;

/// Each method's name on the wire.
pub const METHOD_NAMES: [(&str, Method); METHOD_COUNT] = [
    ("ping", Method::Ping),
    ("server/discover", Method::ServerDiscover),
    ("tools/list", Method::ToolsList),
    ("tools/call", Method::ToolsCall),
    ("prompts/list", Method::PromptsList),
    ("prompts/get", Method::PromptsGet),
    ("resources/list", Method::ResourcesList),
    ("resources/templates/list", Method::ResourcesTemplatesList),
    ("resources/read", Method::ResourcesRead),
    ("resources/subscribe", Method::ResourcesSubscribe),
    ("resources/unsubscribe", Method::ResourcesUnsubscribe),
    ("completion/complete", Method::CompletionComplete),
    ("logging/setLevel", Method::LoggingSetLevel),
    ("tasks/get", Method::TasksGet),
    ("tasks/update", Method::TasksUpdate),
    ("tasks/cancel", Method::TasksCancel),
];

impl Method {
    pub fn parse(name: &str) -> Option<Self> {
        METHOD_NAMES.iter().find(|(n, _)| *n == name).map(|(_, m)| *m)
    }
}

/// The `method` label of a request's metrics (a position in `metrics::METHOD_LABELS`): a
/// method we answer by its name, anything else by its kind.
fn method_label(body: &Result<Body, rpc::FramingError>) -> usize {
    use crate::metrics::kind_label;
    match body {
        Err(_) | Ok(Body::Single(Err(_))) => kind_label("invalid"),
        Ok(Body::Batch(_)) => kind_label("batch"),
        Ok(Body::Single(Ok(Message::Request { method, .. }))) => {
            METHOD_NAMES.iter().position(|(n, _)| n == method).unwrap_or_else(|| kind_label("unknown"))
        }
        Ok(Body::Single(Ok(Message::Notification { .. }))) => kind_label("notification"),
        Ok(Body::Single(Ok(Message::Response { .. }))) => kind_label("response"),
    }
}

/// One request, from its bytes to its reply.
pub async fn handle(server: &Arc<McpServer>, caller: &Caller, headers: &HeaderMap, bytes: &[u8]) -> Reply {
    let parsed = rpc::parse(bytes);
    let method = method_label(&parsed);
    let reply = answer(server, caller, headers, parsed).await;
    crate::metrics::request(method, reply.outcome());
    reply
}

async fn answer(
    server: &Arc<McpServer>,
    caller: &Caller,
    headers: &HeaderMap,
    parsed: Result<Body, rpc::FramingError>,
) -> Reply {
    let header_version = header(headers, super::headers::PROTOCOL_VERSION);
    let body = match parsed {
        Ok(body) => body,
        Err(e) => return Reply::error(StatusCode::BAD_REQUEST, &Value::Null, e.code, &e.message, None),
    };
    match body {
        Body::Batch(items) => super::handshake::batch(server, caller, headers, header_version, items).await,
        Body::Single(Err((id, e))) => Reply::error(StatusCode::BAD_REQUEST, &id, e.code, &e.message, None),
        Body::Single(Ok(message)) => {
            let params = match &message {
                Message::Request { params, .. } | Message::Notification { params, .. } => params.as_ref(),
                Message::Response { .. } => None,
            };
            let stateless_meta =
                params.and_then(|p| p.get("_meta")).is_some_and(|m| m.get(META_PROTOCOL_VERSION).is_some());
            let stateless_header = header_version.is_some_and(|h| !HANDSHAKE_VERSIONS.contains(&h));
            if stateless_meta || stateless_header {
                super::stateless::handle(server, caller, headers, header_version, message).await
            } else {
                super::handshake::handle(server, caller, headers, header_version, message).await
            }
        }
    }
}

pub fn method_not_found(status: StatusCode, id: &Value, method: &str) -> Reply {
    Reply::error(status, id, rpc::METHOD_NOT_FOUND, &format!("Method not found: {method}"), None)
}

/// tools/list, in both eras, from the precomputed bytes of the caller's tier.
pub fn list_tools(server: &McpServer, caller: &Caller, id: &Value, params: Option<&Value>, stateless: bool) -> Reply {
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
    let lists = server.list_for(caller.tier);
    Reply::shared_result(id, if stateless { &lists.stateless } else { &lists.handshake })
}

/// -32602 for a log level that is not one of MCP's eight.
pub fn invalid_log_level(status: StatusCode, id: &Value, level: &Value) -> Reply {
    let levels: Vec<&str> = toolgate_domain::LogLevel::ALL.iter().map(|l| l.as_str()).collect();
    let message = format!("log level {level} is not one of {}", levels.join(", "));
    Reply::error(status, id, rpc::INVALID_PARAMS, &message, Some(serde_json::json!({"levels": levels})))
}

/// The methods of prompts, resources and completions, answered alike in both eras; None for
/// any other method.
pub async fn surface_method(
    server: &Arc<McpServer>,
    caller: &Caller,
    id: &Value,
    method: Method,
    params: Option<Value>,
    era: &super::call::Era,
) -> Option<Reply> {
    let p = params.as_ref();
    Some(match method {
        Method::PromptsList => super::prompts::list(server, caller, id, p, era).await,
        Method::PromptsGet => super::prompts::get(server, caller, id, params, era).await,
        Method::ResourcesList => super::resources::list(server, caller, id, p, era).await,
        Method::ResourcesTemplatesList => super::resources::templates(server, caller, id, p, era),
        Method::ResourcesRead => super::resources::read(server, caller, id, p, era).await,
        Method::CompletionComplete => super::completion::complete(server, caller, id, p, era).await,
        _ => return None,
    })
}

//! One message, its era resolved once. A request carrying
//! `_meta["io.modelcontextprotocol/protocolVersion"]`, or an `MCP-Protocol-Version` header that
//! is not a handshake revision, is stateless (2026-07-28); everything else is the handshake
//! era (2025-03-26 … 2025-11-25), in the session its `Mcp-Session-Id` names or in none.
//! Notifications and the client's responses are answered here, as their era takes them.

use axum::http::HeaderMap;
use serde_json::Value;
use toolgate_domain::Caller;

use super::era::Era;
use super::headers::header;
use super::jsonrpc::Message;
use super::{DEFAULT_VERSION, HANDSHAKE_VERSIONS, META_PROTOCOL_VERSION, McpServer, Reply, handshake, stateless};

/// A request, with everything its era says about it.
pub struct Incoming {
    pub id: Value,
    pub method: String,
    pub params: Option<Value>,
    pub era: Era,
}

/// What became of a message: a request to dispatch, or its answer already.
pub enum Arrival {
    Request(Incoming),
    Answered(Reply),
}

/// Where a message came from: a POST of its own, or an item of a 2025-03-26 batch (always
/// the handshake era, at that revision).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Single,
    Batched,
}

pub async fn resolve(
    server: &McpServer,
    caller: &Caller,
    headers: &HeaderMap,
    framing: Framing,
    message: Message,
) -> Arrival {
    let header_version = match framing {
        Framing::Single => header(headers, super::headers::PROTOCOL_VERSION),
        Framing::Batched => Some(DEFAULT_VERSION),
    };
    let params = match &message {
        Message::Request { params, .. } | Message::Notification { params, .. } => params.as_ref(),
        Message::Response { .. } => None,
    };
    let stateless_meta = params.and_then(|p| p.get("_meta")).is_some_and(|m| m.get(META_PROTOCOL_VERSION).is_some());
    let stateless_header = header_version.is_some_and(|h| !HANDSHAKE_VERSIONS.contains(&h));
    if framing == Framing::Single && (stateless_meta || stateless_header) {
        return match message {
            // 2026-07-28 keeps no session to answer into: what the client sends unasked is taken.
            Message::Response { .. } | Message::Notification { .. } => Arrival::Answered(Reply::accepted()),
            Message::Request { id, method, params } => {
                match stateless::era_of(headers, header_version, &id, &method, params.as_ref()) {
                    Ok(era) => Arrival::Request(Incoming { id, method, params, era }),
                    Err(reply) => Arrival::Answered(reply),
                }
            }
        };
    }
    let (id, method, params) = match message {
        Message::Response { id, outcome } => {
            return Arrival::Answered(handshake::on_response(server, caller, headers, id, outcome).await);
        }
        Message::Notification { method, params } => {
            let reply = handshake::on_notification(server, caller, headers, &method, params.as_ref()).await;
            return Arrival::Answered(reply);
        }
        Message::Request { id, method, params } => (id, method, params),
    };
    // `initialize` opens a session: whatever session header it carries is not looked up.
    let session = match method.as_str() {
        "initialize" => None,
        _ => match handshake::session(server, caller, headers, &id).await {
            Ok(session) => session,
            Err(reply) => return Arrival::Answered(reply),
        },
    };
    let version = header_version
        .map(str::to_string)
        .or(session.as_ref().map(|(_, version)| version.clone()))
        .unwrap_or_else(|| DEFAULT_VERSION.into());
    let era = Era::Handshake { version, session: session.map(|(session, _)| session) };
    Arrival::Request(Incoming { id, method, params, era })
}

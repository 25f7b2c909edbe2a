//! One POST body, from its bytes to its reply: parsed, counted, its messages' eras resolved
//! (`incoming`), their methods dispatched (`dispatch`); a 2025-03-26 batch item by item.

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use serde_json::Value;
use toolgate_domain::Caller;

use super::dispatch::{self, METHOD_COUNT, METHOD_NAMES};
use super::headers::header;
use super::incoming::{self, Arrival, Framing};
use super::jsonrpc::{self as rpc, Body, Message};
use super::{McpServer, Reply, handshake};

/// The `method` labels of the requests counted: every method the router knows, then the
/// kinds of message that are not a request for one (the label set stays bounded whatever
/// clients send).
pub const METHOD_LABELS: [&str; METHOD_COUNT + 5] = {
    let mut labels = [""; METHOD_COUNT + 5];
    let mut i = 0;
    while i < METHOD_COUNT {
        labels[i] = METHOD_NAMES[i].0;
        i += 1;
    }
    labels[i] = "notification";
    labels[i + 1] = "response";
    labels[i + 2] = "batch";
    labels[i + 3] = "invalid";
    labels[i + 4] = "unknown";
    labels
};
const _: () = assert!(METHOD_LABELS.len() <= crate::metrics::MAX_METHOD_LABELS, "a counter slot per label");

/// A position in [`METHOD_LABELS`] of a message kind that is not a request for a known method.
fn kind_label(kind: &str) -> usize {
    METHOD_LABELS.iter().rposition(|l| *l == kind).unwrap_or(METHOD_LABELS.len() - 1)
}

/// The `method` label of a request's metrics (a position in [`METHOD_LABELS`]): a method we
/// answer by its name, anything else by its kind.
fn method_label(body: &Result<Body, rpc::FramingError>) -> usize {
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
pub async fn answer_post(server: &Arc<McpServer>, caller: &Caller, headers: &HeaderMap, bytes: &[u8]) -> Reply {
    let parsed = rpc::parse(bytes);
    let method = method_label(&parsed);
    let reply = answer_body(server, caller, headers, parsed).await;
    crate::metrics::request(method, METHOD_LABELS[method], reply.outcome());
    reply
}

async fn answer_body(
    server: &Arc<McpServer>,
    caller: &Caller,
    headers: &HeaderMap,
    parsed: Result<Body, rpc::FramingError>,
) -> Reply {
    match parsed {
        Err(e) => Reply::error(StatusCode::BAD_REQUEST, &Value::Null, e.code, &e.message, None),
        Ok(Body::Batch(items)) => batch(server, caller, headers, items).await,
        Ok(Body::Single(Err((id, e)))) => Reply::error(StatusCode::BAD_REQUEST, &id, e.code, &e.message, None),
        Ok(Body::Single(Ok(message))) => answer_message(server, caller, headers, Framing::Single, message).await,
    }
}

/// One message: its era resolved, then its method dispatched (or its answer, for what the
/// era answers itself).
async fn answer_message(
    server: &Arc<McpServer>,
    caller: &Caller,
    headers: &HeaderMap,
    framing: Framing,
    message: Message,
) -> Reply {
    match incoming::resolve(server, caller, headers, framing, message).await {
        Arrival::Request(incoming) => dispatch::dispatch(server, caller, headers, incoming).await,
        Arrival::Answered(reply) => reply,
    }
}

/// A 2025-03-26 batch: each item answered in turn, by the handshake era's rules.
async fn batch(
    server: &Arc<McpServer>,
    caller: &Caller,
    headers: &HeaderMap,
    items: Vec<Result<Message, (Value, rpc::FramingError)>>,
) -> Reply {
    let mut answers = match handshake::Batch::open(server, header(headers, super::headers::PROTOCOL_VERSION)) {
        Ok(answers) => answers,
        Err(refused) => return refused,
    };
    let headers = &handshake::Batch::headers(headers);
    for item in items {
        let reply = match item {
            Err((id, e)) => Reply::error(StatusCode::OK, &id, e.code, &e.message, None),
            Ok(message) => {
                let refused = match &message {
                    Message::Request { id, method, .. } => answers.refusal(id, method),
                    _ => None,
                };
                match refused {
                    Some(refused) => refused,
                    None => Box::pin(answer_message(server, caller, headers, Framing::Batched, message)).await,
                }
            }
        };
        if let Err(ended) = answers.push(reply) {
            return ended;
        }
    }
    answers.finish()
}

//! What one MCP request gets back: a status, maybe a JSON body, maybe a new session id. A
//! body is text, or chunks around bytes shared by every request (the precomputed tools/list),
//! which go out without being copied.

use axum::http::StatusCode;
use std::convert::Infallible;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use serde_json::Value;

use super::jsonrpc;

pub enum Payload {
    Text(String),
    Chunks(Vec<Bytes>),
    /// Server-Sent Events, each already framed (see `stream`).
    Events(BoxStream<'static, Result<Bytes, Infallible>>),
}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Payload::Text(t) => f.debug_tuple("Text").field(t).finish(),
            Payload::Chunks(c) => f.debug_tuple("Chunks").field(c).finish(),
            Payload::Events(_) => f.write_str("Events(..)"),
        }
    }
}

/// How large answers may grow: one tools/call answer, and a batch's answers together. A batch
/// of 100 page-sized calls could otherwise build an answer of a hundred megabytes.
#[derive(Clone, Copy, Debug)]
pub struct AnswerLimits {
    /// One tools/call answer, in bytes; a larger one is replaced by an error saying so.
    pub max_answer_bytes: usize,
    /// A batch's answers together, in bytes; once reached, the batch's remaining requests
    /// are not run and each is answered with an error.
    pub max_batch_bytes: usize,
    /// One page of a listing tool's answer, in bytes (`--page-bytes`).
    pub page_bytes: usize,
}

impl Default for AnswerLimits {
    fn default() -> Self {
        Self {
            max_answer_bytes: 4 << 20,
            max_batch_bytes: 8 << 20,
            page_bytes: crate::services::DEFAULT_ANSWER_PAGE_BYTES,
        }
    }
}

impl Payload {
    /// The body's size in bytes (None for a stream, whose size is not known ahead).
    pub fn size(&self) -> Option<usize> {
        match self {
            Payload::Text(text) => Some(text.len()),
            Payload::Chunks(chunks) => Some(chunks.iter().map(Bytes::len).sum()),
            Payload::Events(_) => None,
        }
    }

    /// The whole body as one string (batches join their answers).
    pub fn into_text(self) -> String {
        match self {
            Payload::Text(text) => text,
            Payload::Chunks(chunks) => chunks.iter().map(|c| String::from_utf8_lossy(c)).collect(),
            // Never built where a body is joined (batches do not stream).
            Payload::Events(_) => String::new(),
        }
    }
}

#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Option<Payload>,
    pub session_id: Option<String>,
    /// The JSON-RPC error code when the body is an error (for /metrics).
    pub error_code: Option<i64>,
    /// A refusal's honest wait, also sent as HTTP `Retry-After` (whole seconds, rounded up)
    /// for clients and proxies that read only the headers.
    pub retry_after_ms: Option<u32>,
}

impl Reply {
    pub fn json(status: StatusCode, body: String) -> Self {
        Self { status, body: Some(Payload::Text(body)), session_id: None, error_code: None, retry_after_ms: None }
    }

    /// `{"jsonrpc":"2.0","id":..,"result":<shared>}` without copying `shared`'s chunks.
    pub fn shared_result(id: &Value, shared: &[Bytes]) -> Self {
        let head = format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":"#,
            serde_json::to_string(id).unwrap_or_else(|_| "null".into())
        );
        let mut chunks = Vec::with_capacity(shared.len() + 2);
        chunks.push(Bytes::from(head));
        chunks.extend_from_slice(shared);
        chunks.push(Bytes::from_static(b"}"));
        Self {
            status: StatusCode::OK,
            body: Some(Payload::Chunks(chunks)),
            session_id: None,
            error_code: None,
            retry_after_ms: None,
        }
    }

    /// How the request was answered, for /metrics.
    pub fn outcome(&self) -> crate::metrics::Outcome {
        use crate::metrics::Outcome;
        match (&self.body, self.error_code) {
            (_, Some(_)) => Outcome::Error,
            (Some(Payload::Events(_)), None) => Outcome::Stream,
            (None, None) => Outcome::Accepted,
            _ => Outcome::Ok,
        }
    }

    /// A 200 whose body is a stream of Server-Sent Events.
    pub fn stream(events: BoxStream<'static, Result<Bytes, Infallible>>) -> Self {
        Self {
            status: StatusCode::OK,
            body: Some(Payload::Events(events)),
            session_id: None,
            error_code: None,
            retry_after_ms: None,
        }
    }

    pub fn accepted() -> Self {
        Self { status: StatusCode::ACCEPTED, body: None, session_id: None, error_code: None, retry_after_ms: None }
    }

    /// A call whose task failed (a panic in a handler): an internal error answering request
    /// `id`, never a hang.
    pub fn task_failed(id: &Value, why: &str) -> Self {
        tracing::error!("a tools/call task failed: {why}");
        let data = serde_json::json!({"retry_after_ms": null, "remediation": "a fault inside the server; the log has it. Durable work (an execution) may have started: look it up before calling again"});
        Self::error(StatusCode::OK, id, jsonrpc::INTERNAL_ERROR, "the call failed inside the server", Some(data))
    }

    /// -32602 for a log level that is not one of MCP's eight.
    pub fn invalid_log_level(status: StatusCode, id: &Value, level: &Value) -> Self {
        let levels: Vec<&str> = toolgate_domain::LogLevel::ALL.iter().map(|l| l.as_str()).collect();
        let message = format!("log level {level} is not one of {}", levels.join(", "));
        Self::error(status, id, jsonrpc::INVALID_PARAMS, &message, Some(serde_json::json!({"levels": levels})))
    }

    /// The same reply, saying when to try again.
    pub fn retry_after(self, ms: u64) -> Self {
        Self { retry_after_ms: Some(u32::try_from(ms).unwrap_or(u32::MAX)), ..self }
    }

    pub fn error(status: StatusCode, id: &Value, code: i64, message: &str, data: Option<Value>) -> Self {
        Self { error_code: Some(code), ..Self::json(status, jsonrpc::error(id, code, message, data)) }
    }

    /// An error whose `data` is serialized as it is (see [`jsonrpc::error_with`]).
    pub fn error_with(status: StatusCode, id: &Value, code: i64, message: &str, data: &impl serde::Serialize) -> Self {
        Self { error_code: Some(code), ..Self::json(status, jsonrpc::error_with(id, code, message, Some(data))) }
    }
}

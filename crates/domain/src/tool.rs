//! What handlers return.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::StoreError;

/// A successful call.
#[derive(Debug)]
pub enum ToolOutput {
    /// Becomes `structuredContent` and a text block holding the same JSON.
    Structured(Value),
    /// `structuredContent`, with a text block of its own for readers who want a sentence
    /// (the spec's SHOULD of a serialized copy, traded for a readable one).
    Summarized { structured: Value, text: String },
    /// A complete CallToolResult written in tools.yaml (`builtin::static`).
    Static(&'static str),
}

/// A call that did not succeed. Every variant says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments passed the schema but not the handler's own rules.
    #[error("{0}")]
    InvalidArguments(String),
    /// What the call names does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The caller may not do this, with the next step.
    #[error("{message}")]
    Refused { message: String, remediation: String },
    /// A question for the client got no usable answer (or, in 2026-07-28, none yet).
    #[error(transparent)]
    Ask(#[from] crate::AskError),
    /// The store failed; retrying may help.
    #[error("store error: {0}")]
    Store(#[from] StoreError),
    /// The store failed after an execution was durably started: the caller must look it up
    /// by its id rather than call again (which would start another).
    #[error("store error after execution {execution_id} started: {error}")]
    StoreAfterStart { error: StoreError, execution_id: String },
}

impl ToolError {
    /// Store faults are the server's problem; the rest are results the model can read.
    pub fn is_internal(&self) -> bool {
        matches!(self, ToolError::Store(_) | ToolError::StoreAfterStart { .. })
    }

    /// This error, raised once execution `execution_id` exists: a store fault then names it.
    pub fn after_start(self, execution_id: &str) -> Self {
        match self {
            ToolError::Store(error) => ToolError::StoreAfterStart { error, execution_id: execution_id.to_string() },
            other => other,
        }
    }
}

pub type ToolResult = Result<ToolOutput, ToolError>;

/// Arguments (already valid against the inputSchema) into the tool's typed struct.
pub fn typed_arguments<T: DeserializeOwned>(arguments: Value) -> Result<T, ToolError> {
    serde_json::from_value(arguments)
        .map_err(|e| ToolError::InvalidArguments(format!("arguments do not fit the tool: {e}")))
}

/// A listing tool's arguments (`pages:` in tools.yaml): which page they ask for. Generated for
/// every tool that pages; the whole arguments, serialized, are the query a cursor is bound to.
pub trait Paged: serde::Serialize {
    /// The previous answer's `next_cursor`.
    fn cursor(&self) -> Option<&str>;
    /// Where the page starts, for tools that take an `offset` too.
    fn offset(&self) -> Option<i64>;
    /// The most rows the caller wants in one page.
    fn limit(&self) -> Option<i64>;
}

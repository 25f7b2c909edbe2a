//! What one MCP request gets back: a status, maybe a JSON body, maybe a new session id.

use axum::http::StatusCode;
use serde_json::Value;

use super::jsonrpc;

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
        Self::json(status, jsonrpc::error(id, code, message, data))
    }
}

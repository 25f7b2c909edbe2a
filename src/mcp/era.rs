//! The era a request came in on, resolved once (`incoming.rs`), and what it changes: how a
//! result is shaped, which status a refusal gets, whether lists carry caching hints, whether
//! a question goes out on a stream or comes back as `input_required`.

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{Value, json};
use toolgate_domain::LogLevel;

use super::jsonrpc as rpc;
use super::replay::Ring;
use super::{IS_ERROR_FOR_ARGUMENTS_FROM, META_SERVER_INFO, McpServer, Reply};
use crate::untrusted;

/// From 2025-11-25 on, a resumable stream opens with a priming event (SEP-1699).
const PRIMING_FROM: &str = "2025-11-25";

#[derive(Clone)]
pub enum Era {
    /// 2025-03-26 … 2025-11-25: `initialize`, and sessions the client may use or not.
    Handshake { version: String, session: Option<InSession> },
    /// 2026-07-28: the version, the client's capabilities and a log level in each request.
    Stateless { version: String, capabilities: Value, log_level: Option<LogLevel> },
}

/// The live session a handshake-era request named (`Mcp-Session-Id`).
#[derive(Clone)]
pub struct InSession {
    pub id: String,
    pub capabilities: Value,
    pub log_level: Option<LogLevel>,
    /// Every frame its streams sent, for resumption.
    pub ring: Arc<Ring>,
    /// The toolsets its `initialize` chose, and those `enable_toolset` added.
    pub toolsets: Option<toolgate_domain::toolsets::Toolsets>,
    pub enabled: toolgate_domain::toolsets::Toolsets,
}

impl Era {
    pub fn version(&self) -> &str {
        match self {
            Era::Handshake { version, .. } | Era::Stateless { version, .. } => version,
        }
    }

    /// The capabilities the client declared: this request's, or its session's.
    pub fn client_capabilities(&self) -> Option<&Value> {
        match self {
            Era::Handshake { session, .. } => session.as_ref().map(|s| &s.capabilities),
            Era::Stateless { capabilities, .. } => Some(capabilities),
        }
    }

    /// The level of log lines the client asked for (its session's, or this request's).
    pub fn log_level(&self) -> Option<LogLevel> {
        match self {
            Era::Handshake { session, .. } => session.as_ref().and_then(|s| s.log_level),
            Era::Stateless { log_level, .. } => *log_level,
        }
    }

    pub fn session(&self) -> Option<&InSession> {
        match self {
            Era::Handshake { session, .. } => session.as_ref(),
            Era::Stateless { .. } => None,
        }
    }

    /// Questions to the client come back as `input_required` results, answered in a
    /// later round (2026-07-28), not on the call's stream.
    pub fn asks_in_rounds(&self) -> bool {
        matches!(self, Era::Stateless { .. })
    }

    /// Results say they are complete (`resultType`) and who answered; lists carry `ttlMs`
    /// and `cacheScope` (2026-07-28).
    pub fn describes_results(&self) -> bool {
        matches!(self, Era::Stateless { .. })
    }

    /// The method, the tool's name and `x-mcp-header` arguments are mirrored in headers,
    /// which must agree with the body (2026-07-28).
    pub fn mirrors_in_headers(&self) -> bool {
        matches!(self, Era::Stateless { .. })
    }

    /// The tasks extension exists: a tool that runs only as a task needs it declared.
    pub fn has_tasks(&self) -> bool {
        matches!(self, Era::Stateless { .. })
    }

    /// A stream in this session opens with a priming event (an id to resume from).
    pub fn primes_streams(&self) -> bool {
        self.session().is_some() && self.version() >= PRIMING_FROM
    }

    /// From 2025-11-25 on, bad arguments are a tool result the model can read (`isError`).
    pub fn arguments_as_tool_result(&self) -> bool {
        matches!(self, Era::Stateless { .. }) || self.version() >= IS_ERROR_FOR_ARGUMENTS_FROM
    }

    /// The HTTP status of a JSON-RPC error with `code`.
    pub fn status(&self, code: i64) -> StatusCode {
        match (self, code) {
            (Era::Stateless { .. }, rpc::INVALID_PARAMS | rpc::HEADER_MISMATCH | rpc::MISSING_CLIENT_CAPABILITY) => {
                StatusCode::BAD_REQUEST
            }
            _ => StatusCode::OK,
        }
    }

    /// The HTTP status of a method this era does not serve.
    pub fn not_found_status(&self) -> StatusCode {
        match self {
            Era::Handshake { .. } => StatusCode::OK,
            Era::Stateless { .. } => StatusCode::NOT_FOUND,
        }
    }

    /// A handler's structured result: serialized once, then written both as the text block
    /// and as `structuredContent` (keys in the order serde_json sorts them).
    pub fn structured_success(&self, id: &Value, server: &McpServer, value: &Value) -> Reply {
        let raw = serde_json::to_string(value).expect("JSON values serialize");
        if self.describes_results() {
            let result =
                json!({"content": [{"type": "text", "text": raw}], "structuredContent": value, "isError": false});
            return self.success(id, server, result);
        }
        let text = serde_json::to_string(&raw).expect("a string serializes");
        let result =
            format!(r#"{{"content":[{{"text":{text},"type":"text"}}],"isError":false,"structuredContent":{raw}}}"#);
        Reply::json(StatusCode::OK, rpc::result_raw(id, &result))
    }

    /// A structured result that carries text the agents reported: the text block holds the
    /// JSON inside the untrusted-data block, and `_meta` marks it (`crate::untrusted`).
    pub fn agent_data_success(&self, id: &Value, server: &McpServer, value: Value, text: Option<String>) -> Reply {
        let text = match text {
            Some(summary) => untrusted::wrapped(&untrusted::ascii_json(&Value::String(summary))),
            None => untrusted::wrapped(&untrusted::ascii_json(&value)),
        };
        let result = json!({"content": [{"type": "text", "text": text}], "structuredContent": value, "isError": false,
                            "_meta": {untrusted::META_KEY: untrusted::meta()}});
        self.success(id, server, result)
    }

    /// A result as this era shapes it: 2026-07-28 says it is complete and who answered.
    pub fn success(&self, id: &Value, server: &McpServer, mut result: Value) -> Reply {
        if self.describes_results()
            && let Some(obj) = result.as_object_mut()
        {
            obj.insert("resultType".into(), json!("complete"));
            let meta = obj.entry("_meta").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert(META_SERVER_INFO.into(), server.server_info.clone());
            }
        }
        Reply::json(StatusCode::OK, rpc::result(id, &result))
    }
}

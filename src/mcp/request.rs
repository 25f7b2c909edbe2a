//! What a tools/call is answered with and by whom: the era it came in on (which shapes every
//! result), the request's identity and listeners, and the outcome (the reply and what the
//! audit row says), with the refusals every call may end in.

use axum::http::StatusCode;
use serde_json::{Value, json};
use toolgate_domain::audit::AuditOutcome;
use toolgate_domain::catalogue::ToolMeta;
use toolgate_domain::{CancellationToken, ClientRequests, Denial, LogSink, ProgressSink};

use super::jsonrpc as rpc;
use super::{IS_ERROR_FOR_ARGUMENTS_FROM, META_SERVER_INFO, McpServer, Reply, denial_code};
use crate::surface::untrusted;

/// Which era the call came in on, and what that changes.
#[derive(Clone)]
pub struct Era {
    pub stateless: bool,
    pub version: String,
    /// The capabilities the client declared (this request's, or its session's).
    pub client_capabilities: Option<Value>,
}

impl Era {
    /// From 2025-11-25 on, bad arguments are a tool result the model can read (`isError`).
    pub fn arguments_as_tool_result(&self) -> bool {
        self.stateless || self.version.as_str() >= IS_ERROR_FOR_ARGUMENTS_FROM
    }

    pub fn status(&self, code: i64) -> StatusCode {
        match (self.stateless, code) {
            (true, rpc::INVALID_PARAMS | rpc::HEADER_MISMATCH | rpc::MISSING_CLIENT_CAPABILITY) => {
                StatusCode::BAD_REQUEST
            }
            _ => StatusCode::OK,
        }
    }

    /// A handler's structured result: serialized once, then written both as the text block
    /// and as `structuredContent` (keys in the order serde_json sorts them).
    pub fn structured_success(&self, id: &Value, server: &McpServer, value: &Value) -> Reply {
        let raw = serde_json::to_string(value).expect("JSON values serialize");
        if self.stateless {
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
    /// JSON inside the untrusted-data block, and `_meta` marks it (`surface::untrusted`).
    pub fn agent_data_success(&self, id: &Value, server: &McpServer, value: Value, text: Option<String>) -> Reply {
        let text = match text {
            Some(summary) => untrusted::wrapped(&untrusted::ascii_json(&Value::String(summary))),
            None => untrusted::wrapped(&untrusted::ascii_json(&value)),
        };
        let result = json!({"content": [{"type": "text", "text": text}], "structuredContent": value, "isError": false,
                            "_meta": {untrusted::META_KEY: untrusted::meta()}});
        self.success(id, server, result)
    }

    pub fn success(&self, id: &Value, server: &McpServer, mut result: Value) -> Reply {
        if self.stateless
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

/// A finished call: what the client gets and what the audit row says.
pub(super) struct Outcome {
    pub reply: Reply,
    pub result: AuditOutcome,
    pub detail: String,
}

/// One request's identity: its JSON-RPC id, its era and its correlation id; where its
/// progress goes and what tells it the client went away.
pub(super) struct Request<'a> {
    pub id: &'a Value,
    pub era: &'a Era,
    pub correlation_id: String,
    pub listeners: Listeners,
}

impl Request<'_> {
    pub fn error(&self, code: i64, message: String, data: Option<Value>) -> Outcome {
        Outcome {
            detail: format!("{code}: {message}"),
            reply: Reply::error(self.era.status(code), self.id, code, &message, data),
            result: AuditOutcome::Denied,
        }
    }

    /// A denial with the A4 data every refusal carries.
    pub fn denied(&self, server: &McpServer, denial: Denial) -> Outcome {
        self.denied_retrying(server, denial, toolgate_domain::denial::RETRY_AFTER_STORE_FAULT_MS)
    }

    /// A tool's denial: a store fault's retry hint is the tool's own (policy.yaml
    /// `store_fault_retry`).
    pub fn denied_tool(&self, server: &McpServer, denial: Denial, tool: &ToolMeta) -> Outcome {
        self.denied_retrying(server, denial, tool.store_fault_retry_ms)
    }

    fn denied_retrying(&self, server: &McpServer, denial: Denial, store_fault_ms: u64) -> Outcome {
        let code = denial_code(&denial);
        crate::metrics::denial(code);
        if let Denial::ApprovalPending { approval, minted: true } = &denial {
            crate::metrics::approval(crate::metrics::ApprovalEvent::Minted, &approval.tool);
            tracing::info!(approval_id = %approval.id, tool = %approval.tool, submitter = %approval.submitter, "approval ticket minted; waiting for a person");
        }
        if let Denial::InvalidArguments(invalid) = &denial {
            let details = invalid.details(&self.correlation_id);
            let message = invalid.message();
            let reply = if self.era.arguments_as_tool_result() {
                let text = format!("{message}. {}", invalid.remediation());
                let details = serde_json::to_value(&details).unwrap_or_default();
                self.era.success(
                    self.id,
                    server,
                    json!({"content": [{"type": "text", "text": text}], "structuredContent": details, "isError": true}),
                )
            } else {
                Reply::error_with(StatusCode::OK, self.id, code, &message, &details)
            };
            return Outcome { reply, result: AuditOutcome::Denied, detail: message };
        }
        let mut data = json!({
            "correlation_id": self.correlation_id,
            "retry_after_ms": match denial {
                Denial::StoreFault { .. } => Some(store_fault_ms),
                _ => denial.retry_after_ms(),
            },
            "remediation": denial.remediation(),
        });
        if let (Some(obj), Some(Value::Object(extra))) = (data.as_object_mut(), denial.data()) {
            obj.extend(extra);
        }
        Outcome {
            reply: Reply::error(self.era.status(code), self.id, code, &denial.message(), Some(data)),
            result: denial.audit_outcome(),
            detail: denial.audit_detail(code),
        }
    }
}

/// Who hears from a call while it runs: its progress, its log lines, its questions for the
/// client (handshake era), and whether the client is still there.
#[derive(Default)]
pub struct Listeners {
    pub progress: ProgressSink,
    pub log: LogSink,
    pub client: ClientRequests,
    pub cancellation: CancellationToken,
}

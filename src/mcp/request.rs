//! What a request is answered with and by whom: the request's identity, era and listeners,
//! and the outcome (the reply and what the audit row says), with the refusals every call may
//! end in.

use axum::http::StatusCode;
use serde_json::{Value, json};
use toolgate_domain::audit::AuditOutcome;
use toolgate_domain::catalogue::ToolMeta;
use toolgate_domain::{CancellationToken, ClientRequests, Denial, LogSink, ProgressSink};

use super::era::Era;
use super::{McpServer, Reply, denial_code};

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

    /// A denial with the refusal envelope every refusal carries.
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
        let (slot, label) = super::codes::denial_label(code);
        crate::metrics::denial(slot, label);
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
    /// What the client's tool list holds, and how `enable_toolset` adds to it.
    pub listing: toolgate_domain::toolsets::ToolListing,
}

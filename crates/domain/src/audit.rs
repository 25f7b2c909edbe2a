//! The audit log's rows: one per tools/call outcome, review, session event and authentication
//! failure. Built with [`AuditEvent::new`] and its setters, never field by field.

use serde::{Deserialize, Serialize};

use crate::Caller;

/// How an audited action ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuditOutcome {
    Success,
    Denied,
    Failure,
    /// A ticket was minted or is still waiting for a person.
    Pending,
    Approved,
}

impl AuditOutcome {
    pub fn label(self) -> &'static str {
        match self {
            AuditOutcome::Success => "success",
            AuditOutcome::Denied => "denied",
            AuditOutcome::Failure => "failure",
            AuditOutcome::Pending => "pending",
            AuditOutcome::Approved => "approved",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEvent {
    pub at_ms: i64,
    pub principal: Option<String>,
    pub token_id: Option<String>,
    /// `mcp.<tool>`, `session.open`, `session.close`, `auth.failure`, `approval.review`.
    pub action: String,
    pub target: Option<String>,
    /// An [`AuditOutcome`] label.
    pub result: String,
    pub detail: Option<String>,
    pub correlation_id: Option<String>,
    /// The replica that wrote the row, when several share one database (set by the store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
}

impl AuditEvent {
    pub fn new(at_ms: i64, action: impl Into<String>, outcome: AuditOutcome) -> Self {
        Self {
            at_ms,
            principal: None,
            token_id: None,
            action: action.into(),
            target: None,
            result: outcome.label().to_string(),
            detail: None,
            correlation_id: None,
            replica: None,
        }
    }

    /// The caller and the token it came with.
    pub fn by(mut self, caller: &Caller) -> Self {
        self.principal = Some(caller.principal.name.clone());
        self.token_id = Some(caller.token_id.clone());
        self
    }

    /// A principal acting without a token (the console, a reviewer).
    pub fn by_principal(mut self, name: &str) -> Self {
        self.principal = Some(name.to_string());
        self
    }

    pub fn target(mut self, target: impl Into<String>) -> Self {
        self.target = Some(target.into());
        self
    }

    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    pub fn correlation(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = Some(id.into());
        self
    }
}

#[derive(Clone, Debug, Default)]
pub struct AuditFilter {
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub principal: Option<String>,
    pub action_prefix: Option<String>,
    pub result: Option<String>,
    pub correlation_id: Option<String>,
    pub limit: i64,
}

/// Where audit events go: the batching writer, or (on the console) straight to the store.
pub trait AuditSink: Send + Sync {
    fn record(&self, event: AuditEvent);
}

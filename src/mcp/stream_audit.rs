//! Every stream's audit rows and its close's count, kept by one guard the stream owns.

use std::sync::Arc;

use toolgate_domain::audit::TargetType;

use super::McpServer;

/// A stream's audit rows and its close's count: `stream.attach` when it opens, `stream.close`
/// with the reason when it ends (`client_gone` when its connection goes first).
pub struct StreamAudit {
    server: Arc<McpServer>,
    principal: String,
    token_id: String,
    /// The session the stream belongs to, or the request it answers.
    target: (TargetType, String),
    /// `call`, `channel` or `resume`, with what it follows.
    what: String,
    closed: Option<&'static str>,
}

impl StreamAudit {
    pub fn attach(
        server: &Arc<McpServer>,
        caller: &toolgate_domain::Caller,
        target: (TargetType, &str),
        what: String,
    ) -> Self {
        let audit = Self {
            server: server.clone(),
            principal: caller.principal.name.clone(),
            token_id: caller.token_id.clone(),
            target: (target.0, target.1.to_string()),
            what,
            closed: None,
        };
        audit.record("stream.attach", audit.what.clone());
        audit
    }

    /// The token that opened the stream (its credential is re-checked while it runs).
    pub fn token_id(&self) -> &str {
        &self.token_id
    }

    /// The stream reached its end: its last frame (`completed`), or a close with its reason.
    pub fn close(&mut self, reason: &'static str) {
        self.closed.get_or_insert(reason);
    }

    fn record(&self, action: &str, detail: String) {
        use toolgate_domain::audit::{AuditEvent, AuditOutcome};
        let mut event = AuditEvent::new(self.server.now_ms(), action, AuditOutcome::Success)
            .target(self.target.0, self.target.1.clone())
            .detail(detail)
            .correlation(self.server.correlation_id());
        event.principal = Some(self.principal.clone());
        event.token_id = Some(self.token_id.clone());
        self.server.record(event);
    }
}

impl Drop for StreamAudit {
    fn drop(&mut self) {
        let reason = self.closed.unwrap_or("client_gone");
        crate::metrics::stream_closed(reason);
        self.record("stream.close", format!("{}: {reason}", self.what));
    }
}

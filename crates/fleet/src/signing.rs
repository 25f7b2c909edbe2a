//! Signed frames on the way out (docs/trust.md): with a code-signing key, every frame that makes
//! an agent act is wrapped in a [`SignedFrame`] for that agent before it is queued, at the one
//! place frames are queued ([`Hub::send`]). Signing is the server's (the key is sealed there);
//! a refusal an agent reports is audited here.

use std::sync::Arc;

use toolgate_domain::audit::{AuditEvent, AuditOutcome, AuditSink};
use toolgate_domain::fleet::signing::{FrameRefusal, SIGNED_FRAME_VALID_MS, SignedFrame};
use toolgate_domain::fleet::wire::ServerMessage;

use crate::hub::Hub;

/// Signs frames for agents (the server's code-signing key).
pub trait FrameSigning: Send + Sync {
    fn sign(
        &self,
        payload: String,
        agent_id: &str,
        execution_id: Option<&str>,
        deadline_ms: i64,
    ) -> Result<SignedFrame, String>;
}

/// The signer, and where agents' refusals are recorded.
pub(crate) struct Signing {
    pub(crate) signer: Arc<dyn FrameSigning>,
    pub(crate) audit: Arc<dyn AuditSink>,
}

impl Hub {
    /// Frames that make agents act are signed by `signer`; refusals are audited to `audit`.
    pub fn with_signing(mut self, signer: Arc<dyn FrameSigning>, audit: Arc<dyn AuditSink>) -> Self {
        self.signing = Some(Signing { signer, audit });
        self
    }

    /// Whether frames that make agents act are signed.
    pub fn signs(&self) -> bool {
        self.signing.is_some()
    }

    /// `message` as it goes to `agent_id`: signed when it makes the agent act and there is a
    /// key. None when it cannot be signed (logged): an unsigned one would only be refused.
    pub(crate) fn outgoing(&self, agent_id: &str, message: ServerMessage) -> Option<ServerMessage> {
        let Some(signing) = self.signing.as_ref().filter(|_| message.acts()) else { return Some(message) };
        let execution_id = message.execution_id().map(String::from);
        let signed = serde_json::to_string(&message).map_err(|e| e.to_string()).and_then(|payload| {
            let deadline_ms = self.clock().now_ms() + SIGNED_FRAME_VALID_MS;
            signing.signer.sign(payload, agent_id, execution_id.as_deref(), deadline_ms)
        });
        match signed {
            Ok(frame) => Some(ServerMessage::Signed(Box::new(frame))),
            Err(e) => {
                tracing::error!(%agent_id, "a frame for the agent could not be signed, so it is not sent: {e}");
                None
            }
        }
    }

    /// The agent refused a frame before acting on it: audited (nothing of it ran; a run is
    /// sent again, signed afresh, on its next connection).
    pub(crate) fn frame_refused(&self, agent_id: &str, execution_id: Option<&str>, reason: FrameRefusal, detail: &str) {
        tracing::warn!(%agent_id, ?execution_id, "the agent refused a frame ({}): {detail}", reason.as_str());
        let Some(signing) = &self.signing else { return };
        let execution = execution_id.map(|id| format!(" of execution {id}")).unwrap_or_default();
        let detail = format!("{}{execution}: {}", reason.as_str(), detail.chars().take(512).collect::<String>());
        let event = AuditEvent::new(self.clock().now_ms(), "agent.frame.refused", AuditOutcome::Denied)
            .about_agents([agent_id.to_string()])
            .detail(detail);
        signing.audit.record(event);
    }
}

//! Signed frames (docs/trust.md): every frame that makes an agent act (a run of an instruction
//! or bundle with its parameters, quarantine and its release, compliance rules to evaluate)
//! travels inside a [`SignedFrame`] once the server has a code-signing key. The signature
//! covers the exact bytes of the inner frame, the agent it is for, the execution it belongs
//! to and a deadline; the agent checks it against the CA it pinned at enrollment before its
//! worker sees the frame.

use serde::{Deserialize, Serialize};

use super::wire::ServerMessage;

/// What the signature's bytes start with: a signature over anything else never verifies here.
const CONTEXT: &str = "toolgate signed frame v1";

/// How long a signed frame may be acted on after it was signed.
pub const SIGNED_FRAME_VALID_MS: i64 = 10 * 60 * 1000;

/// A frame for one agent, signed by the server's code-signing key. Its Debug output leaves the
/// payload out: a run's payload may carry plugin secrets (docs/secrets.md).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedFrame {
    /// The inner frame, JSON, exactly as signed.
    pub payload: String,
    /// The agent it is meant for.
    pub agent_id: String,
    /// The execution it belongs to (runs), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    /// Not to be acted on after this (ms since the epoch).
    pub deadline_ms: i64,
    /// The code-signing certificate, then the CA certificates up to (not including) a root the
    /// agent may have pinned: PEM.
    pub chain_pem: String,
    /// ECDSA P-256 with SHA-256 over [`SignedFrame::signed_bytes`], DER, hex.
    pub signature_hex: String,
}

impl std::fmt::Debug for SignedFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedFrame")
            .field("agent_id", &self.agent_id)
            .field("execution_id", &self.execution_id)
            .field("deadline_ms", &self.deadline_ms)
            .field("payload_bytes", &self.payload.len())
            .finish_non_exhaustive()
    }
}

impl SignedFrame {
    /// The bytes the signature covers: every field but the chain and the signature, each on a
    /// line of its own, the payload last (it may hold newlines; nothing follows it).
    pub fn signed_bytes(agent_id: &str, execution_id: Option<&str>, deadline_ms: i64, payload: &str) -> Vec<u8> {
        format!("{CONTEXT}\n{agent_id}\n{}\n{deadline_ms}\n{payload}", execution_id.unwrap_or_default()).into_bytes()
    }

    pub fn own_signed_bytes(&self) -> Vec<u8> {
        Self::signed_bytes(&self.agent_id, self.execution_id.as_deref(), self.deadline_ms, &self.payload)
    }
}

impl ServerMessage {
    /// Whether it makes the agent act (run, quarantine or release, evaluate): what is signed.
    pub fn acts(&self) -> bool {
        matches!(
            self,
            ServerMessage::Run(_)
                | ServerMessage::Quarantine { .. }
                | ServerMessage::Evaluate { .. }
                | ServerMessage::KillSwitches { .. }
        )
    }

    /// The execution a run belongs to.
    pub fn execution_id(&self) -> Option<&str> {
        match self {
            ServerMessage::Run(order) => Some(&order.execution_id),
            _ => None,
        }
    }
}

/// Why an agent refused a frame (it reports it; the server audits it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameRefusal {
    /// A frame that must be signed came unsigned.
    Unsigned,
    /// The signature does not verify, or the chain does not lead to the pinned CA.
    BadSignature,
    /// Past its deadline.
    Expired,
    /// Signed for another agent.
    OtherAgent,
    /// The inner frame does not read, or its execution is not the one signed.
    Malformed,
}

impl FrameRefusal {
    pub fn as_str(self) -> &'static str {
        match self {
            FrameRefusal::Unsigned => "unsigned",
            FrameRefusal::BadSignature => "bad_signature",
            FrameRefusal::Expired => "expired",
            FrameRefusal::OtherAgent => "other_agent",
            FrameRefusal::Malformed => "malformed",
        }
    }
}

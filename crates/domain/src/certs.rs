//! Agent certificates (docs/trust.md): the server's CA signs a short-lived client certificate
//! for each agent, from a key the agent made itself (it sends only a signing request), bound to
//! its agent id by a URI subject alternative name. A certificate's record is kept for the CA's
//! inventory (`list_issued_certs`) and, later, its revocation.

use serde::Serialize;

/// The URI every agent certificate names its agent by: this prefix, then the agent id.
pub const AGENT_URI_PREFIX: &str = "urn:toolgate:agent:";

/// The URI naming `agent_id` in its certificate.
pub fn agent_uri(agent_id: &str) -> String {
    format!("{AGENT_URI_PREFIX}{agent_id}")
}

/// One certificate the CA issued.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IssuedCert {
    /// The serial number in lowercase hex (unique per CA).
    pub serial_hex: String,
    pub agent_id: String,
    /// The CA generation that signed it (the first CA is 1).
    pub ca_generation: u32,
    pub not_before_ms: i64,
    pub not_after_ms: i64,
    pub issued_at_ms: i64,
    /// Why it was issued: `enrollment`, `renewal` or `migration` (an agent enrolled before
    /// certificates, taking one on its next connection).
    pub reason: String,
}

//! Agent certificates (docs/trust.md): the server's CA signs a short-lived client certificate
//! for each agent, from a key the agent made itself (it sends only a signing request), bound to
//! its agent id by a URI subject alternative name. A certificate's record is kept for the CA's
//! inventory (`list_issued_certs`) and its revocation (`revoke_certificate`).

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
    /// Set once it is revoked: it is refused from then on, on every replica.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked: Option<Revocation>,
}

/// Who revoked a certificate, when and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Revocation {
    pub revoked_at_ms: i64,
    pub revoked_by: String,
    pub reason: Option<String>,
}

impl IssuedCert {
    /// Whether it may be used at `now_ms`: not revoked, not expired.
    pub fn is_live(&self, now_ms: i64) -> bool {
        self.revoked.is_none() && now_ms < self.not_after_ms
    }
}

/// Where an agent stands with the CA: what decides whether it may connect without presenting a
/// certificate (on the mutual-TLS listener only an agent that holds no usable one may).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Never issued one (enrolled before certificates), or its last one expired unrevoked.
    NoneUsable,
    /// Its newest certificate is live: it must present it.
    Holds { serial_hex: String, not_after_ms: i64 },
    /// Its newest certificate was revoked: it gets none until it is enrolled again.
    Revoked { serial_hex: String },
}

impl Standing {
    /// From the agent's newest certificate, if any.
    pub fn of(newest: Option<&IssuedCert>, now_ms: i64) -> Standing {
        match newest {
            None => Standing::NoneUsable,
            Some(cert) if cert.revoked.is_some() => Standing::Revoked { serial_hex: cert.serial_hex.clone() },
            Some(cert) if cert.is_live(now_ms) => {
                Standing::Holds { serial_hex: cert.serial_hex.clone(), not_after_ms: cert.not_after_ms }
            }
            Some(_) => Standing::NoneUsable,
        }
    }
}

/// A serial as the CA records it: lowercase hex (the tools accept either case).
pub fn normalized_serial(serial_hex: &str) -> String {
    serial_hex.to_ascii_lowercase()
}

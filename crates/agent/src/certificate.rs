//! The agent's client certificate (docs/trust.md). The agent makes its own key and sends only
//! a signing request, on enrollment and whenever it has no certificate or its certificate is
//! past half its life; the welcome brings the certificate, which is kept with its key and the
//! CA that signed it (one file, owner-only, written durably).

use std::path::Path;

use serde::{Deserialize, Serialize};
use toolgate_domain::fleet::wire::AgentCertificate;

use crate::state::write_durably;

pub const CERTIFICATE_FILE: &str = "certificate.json";

/// A certificate the agent holds, with its key.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Held {
    pub pem: String,
    pub ca_pem: String,
    pub key_pem: String,
    pub not_after_ms: i64,
    pub received_at_ms: i64,
}

/// A key made for a signing request; kept only once its certificate arrives.
pub struct Request {
    pub key_pem: String,
    pub csr_pem: String,
}

/// The certificate in `state_dir`, if any (one that cannot be read is logged and asked for again).
pub fn load(state_dir: &Path) -> Option<Held> {
    let path = state_dir.join(CERTIFICATE_FILE);
    let text = std::fs::read_to_string(&path).ok()?;
    serde_json::from_str(&text)
        .inspect_err(|e| tracing::warn!("{} is unreadable ({e}); asking for a new certificate", path.display()))
        .ok()
}

/// When a held certificate is renewed: half way through its life.
pub fn renewal_due_ms(held: &Held) -> i64 {
    held.received_at_ms + (held.not_after_ms - held.received_at_ms) / 2
}

/// How long a session may go on before it reconnects to renew the certificate held, half way
/// through its life (the server cuts a session off when the certificate it was opened with
/// expires, and the renewing hello asks for the next). None without a certificate, or past
/// that point already (the renewal asked for at this connection failed: it waits).
pub fn renewal_in(state_dir: &Path, now_ms: i64) -> Option<std::time::Duration> {
    let held = load(state_dir).filter(|held| !wanted(Some(held), now_ms))?;
    Some(std::time::Duration::from_millis((renewal_due_ms(&held) - now_ms).max(0) as u64))
}

/// Whether to ask for a certificate now: none held, or past half its life.
pub fn wanted(held: Option<&Held>, now_ms: i64) -> bool {
    held.is_none_or(|h| now_ms >= renewal_due_ms(h))
}

/// A fresh key and a signing request for it.
pub fn request() -> Result<Request, String> {
    let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let csr = rcgen::CertificateParams::default().serialize_request(&key).map_err(|e| e.to_string())?;
    Ok(Request { key_pem: key.serialize_pem(), csr_pem: csr.pem().map_err(|e| e.to_string())? })
}

/// Keeps `certificate` with the key its request was made for.
pub fn save(state_dir: &Path, request: Request, certificate: AgentCertificate, now_ms: i64) -> Result<Held, String> {
    let held = Held {
        pem: certificate.pem,
        ca_pem: certificate.ca_pem,
        key_pem: request.key_pem,
        not_after_ms: certificate.not_after_ms,
        received_at_ms: now_ms,
    };
    let text = serde_json::to_string_pretty(&held).map_err(|e| e.to_string())?;
    write_durably(state_dir, CERTIFICATE_FILE, text.as_bytes()).map_err(|e| e.to_string())?;
    // The CA frames are checked by: the first certificate's, then each generation it vouches for.
    if let Err(e) = crate::signed::pin(state_dir, &held.pem, &held.ca_pem, now_ms) {
        tracing::warn!("the pinned agent CA is kept: {e}");
    }
    Ok(held)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_is_asked_for_when_missing_or_past_half_its_life() {
        assert!(wanted(None, 0));
        let held = Held {
            pem: String::new(),
            ca_pem: String::new(),
            key_pem: String::new(),
            not_after_ms: 1000,
            received_at_ms: 0,
        };
        assert!(!wanted(Some(&held), 499));
        assert!(wanted(Some(&held), 500));
        let request = request().unwrap();
        assert!(request.csr_pem.contains("CERTIFICATE REQUEST") && request.key_pem.contains("PRIVATE KEY"));
    }
}

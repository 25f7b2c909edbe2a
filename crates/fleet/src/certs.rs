//! Client certificates for agents (docs/trust.md): an enrollment or hello that carries a
//! signing request is answered with a certificate from the server's agent CA, when the server
//! has one; on the agent listener with mutual TLS, a hello must come with the certificate the
//! agent holds, and a revoked certificate is refused and its sessions cut off on every replica.
//! Issuing is the server's (its CA's key is sealed there); the hub only asks.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};

use toolgate_domain::StoreError;
use toolgate_domain::certs::Standing;
use toolgate_domain::fleet::wire::{AgentCertificate, Purpose, RefusalCode, ServerMessage};
use toolgate_store::CertStore;

use crate::hub::{Hub, Kick};

/// Why a certificate is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CertificateReason {
    /// The agent's first connection.
    Enrollment,
    /// An enrolled agent without a certificate, or with one past half its life.
    Renewal,
}

impl CertificateReason {
    pub fn as_str(self) -> &'static str {
        match self {
            CertificateReason::Enrollment => "enrollment",
            CertificateReason::Renewal => "renewal",
        }
    }
}

/// Signs agents' certificates (the server's agent CA).
pub trait CertificateIssuer: Send + Sync {
    fn issue<'a>(
        &'a self,
        agent_id: &'a str,
        csr_pem: &'a str,
        reason: CertificateReason,
    ) -> Pin<Box<dyn Future<Output = Result<AgentCertificate, String>> + Send + 'a>>;
}

/// What client certificate a connection came with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerCertificate {
    /// The listener does not ask for one (plain HTTP, or the MCP listener's TLS).
    NotAsked,
    /// The agent listener asked and the agent presented none.
    Absent,
    /// One the TLS layer verified against the CA (the hello checks it is unrevoked).
    Presented(PresentedCertificate),
}

/// A verified client certificate: the agent it names, its serial, when it expires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PresentedCertificate {
    pub agent_id: String,
    pub serial_hex: String,
    pub not_after_ms: i64,
}

/// The serials every replica refuses, as last read (and added to at once by a revocation here).
#[derive(Debug, Default)]
pub(crate) struct RevokedSerials(RwLock<HashSet<String>>);

impl RevokedSerials {
    pub(crate) fn contains(&self, serial_hex: &str) -> bool {
        self.0.read().unwrap_or_else(|e| e.into_inner()).contains(serial_hex)
    }

    fn replace(&self, serials: HashSet<String>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = serials;
    }

    fn insert(&self, serial_hex: &str) {
        self.0.write().unwrap_or_else(|e| e.into_inner()).insert(serial_hex.to_string());
    }
}

/// The CA's side of the hub: who signs, and the record of what was signed and revoked.
pub(crate) struct Certificates {
    pub(crate) issuer: Arc<dyn CertificateIssuer>,
    pub(crate) store: Arc<dyn CertStore>,
}

fn refusal(code: RefusalCode, message: String) -> ServerMessage {
    ServerMessage::Refused { code, message }
}

impl Hub {
    /// Agents that ask are given certificates by `issuer`, recorded in `store`.
    pub fn with_certificates(mut self, issuer: Arc<dyn CertificateIssuer>, store: Arc<dyn CertStore>) -> Self {
        self.certificates = Some(Certificates { issuer, store });
        self
    }

    /// The certificate `csr` asks for, when there is a request and a CA. A request the CA
    /// cannot sign leaves the agent without one (logged; it asks again next time), never
    /// without its connection.
    pub(crate) async fn certificate_for(
        &self,
        agent_id: &str,
        csr: Option<&str>,
        reason: CertificateReason,
    ) -> Option<AgentCertificate> {
        let (certificates, csr) = (self.certificates.as_ref()?, csr?);
        match certificates.issuer.issue(agent_id, csr, reason).await {
            Ok(certificate) => Some(certificate),
            Err(e) => {
                tracing::warn!(%agent_id, "no certificate issued: {e}");
                None
            }
        }
    }

    /// Whether an authenticated agent's hello may go on with the certificate it came with: on
    /// a listener that asks, one naming this agent, unrevoked; or none when the agent holds
    /// none that is usable (enrolled before certificates, or its last one expired) and, for a
    /// session, asks for one.
    pub(crate) async fn admit_certificate(
        &self,
        agent_id: &str,
        peer: &PeerCertificate,
        purpose: Purpose,
        asking: bool,
    ) -> Result<(), ServerMessage> {
        match peer {
            PeerCertificate::NotAsked => Ok(()),
            PeerCertificate::Presented(presented) if presented.agent_id != agent_id => Err(refusal(
                RefusalCode::BadCredential,
                format!("the client certificate names agent {}, not {agent_id}", presented.agent_id),
            )),
            PeerCertificate::Presented(presented) if self.revoked_serials.contains(&presented.serial_hex) => {
                Err(revoked(agent_id, &presented.serial_hex))
            }
            PeerCertificate::Presented(_) => Ok(()),
            PeerCertificate::Absent => {
                let Some(certificates) = &self.certificates else { return Ok(()) };
                let newest = certificates.store.newest_for(agent_id).await.map_err(|e| {
                    refusal(RefusalCode::Busy, format!("the server could not look up the agent's certificate now: {e}"))
                })?;
                match Standing::of(newest.as_ref(), self.clock().now_ms()) {
                    Standing::NoneUsable if asking || purpose != Purpose::Session => Ok(()),
                    Standing::NoneUsable => Err(refusal(
                        RefusalCode::CertificateRequired,
                        format!(
                            "this listener takes agents with client certificates: agent {agent_id} holds none and asks for none (upgrade the agent)"
                        ),
                    )),
                    Standing::Holds { serial_hex, .. } => Err(refusal(
                        RefusalCode::CertificateRequired,
                        format!(
                            "agent {agent_id} holds certificate {serial_hex}: connect with it (if it was lost, revoke it with revoke_certificate and enroll the agent again)"
                        ),
                    )),
                    Standing::Revoked { serial_hex } => Err(revoked(agent_id, &serial_hex)),
                }
            }
        }
    }

    /// A certificate was revoked here: refused and cut off at once (other replicas follow
    /// within their revocation check).
    pub fn certificate_revoked(&self, serial_hex: &str) {
        self.revoked_serials.insert(serial_hex);
        self.cut_off_certificates(self.clock().now_ms());
    }

    /// Reads the revoked serials again and cuts off the sessions they or expiry end; at most
    /// once a revocation check period unless `force` (at start).
    pub async fn check_certificates(&self, force: bool) -> Result<(), StoreError> {
        let Some(certificates) = &self.certificates else { return Ok(()) };
        let now = self.clock().now_ms();
        let due = self.certificates_checked_ms.load(Ordering::Relaxed) + self.settings().revocation_check_ms as i64;
        if !force && now < due {
            return Ok(());
        }
        self.certificates_checked_ms.store(now, Ordering::Relaxed);
        let serials = certificates.store.revoked_serials(now).await?;
        self.revoked_serials.replace(serials.into_iter().collect());
        self.cut_off_certificates(now);
        Ok(())
    }

    /// Closes every session whose certificate is revoked or has expired.
    fn cut_off_certificates(&self, now_ms: i64) {
        let mut agents = self.write();
        for (agent_id, entry) in agents.iter_mut() {
            let Some((serial, not_after_ms)) = entry.live.as_ref().and_then(|l| l.certificate.as_ref()) else {
                continue;
            };
            let kick = match (self.revoked_serials.contains(serial), now_ms >= *not_after_ms) {
                (true, _) => Kick::CertificateRevoked,
                (false, true) => Kick::CertificateExpired,
                (false, false) => continue,
            };
            tracing::info!(%agent_id, %serial, "{kick:?}: disconnected");
            if let Some(live) = entry.live.take() {
                self.live_connections.fetch_sub(1, Ordering::Relaxed);
                let _ = live.kick.send(kick);
            }
        }
    }
}

fn revoked(agent_id: &str, serial_hex: &str) -> ServerMessage {
    refusal(
        RefusalCode::CertificateRevoked,
        format!("agent {agent_id}'s certificate {serial_hex} was revoked: enroll it again with a new enrollment token"),
    )
}

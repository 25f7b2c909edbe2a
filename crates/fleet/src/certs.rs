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

/// The serials every replica refuses, and the agents they were issued to, as last read (and
/// added to at once by a revocation here): a revoked agent's sessions are cut off whatever
/// they were opened with (a listener that asks for no certificate binds none to a session).
#[derive(Debug, Default)]
pub(crate) struct RevokedSerials(RwLock<Revoked>);

#[derive(Debug, Default)]
struct Revoked {
    serials: HashSet<String>,
    agents: HashSet<String>,
}

impl RevokedSerials {
    pub(crate) fn contains(&self, serial_hex: &str) -> bool {
        self.0.read().unwrap_or_else(|e| e.into_inner()).serials.contains(serial_hex)
    }

    fn covers_agent(&self, agent_id: &str) -> bool {
        self.0.read().unwrap_or_else(|e| e.into_inner()).agents.contains(agent_id)
    }

    fn replace(&self, pairs: Vec<(String, String)>) {
        let (serials, agents) = pairs.into_iter().unzip();
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Revoked { serials, agents };
    }

    fn insert(&self, serial_hex: &str, agent_id: &str) {
        let mut revoked = self.0.write().unwrap_or_else(|e| e.into_inner());
        revoked.serials.insert(serial_hex.to_string());
        revoked.agents.insert(agent_id.to_string());
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

    /// Whether an authenticated agent's hello may go on with the certificate it came with.
    /// On every listener: an agent whose certificates were revoked is refused until it is
    /// enrolled again, so it is never given a new one. On a listener that asks: a certificate
    /// naming this agent, unrevoked; or none when the agent holds none that is usable
    /// (enrolled before certificates, or its last one expired) and, for a session, asks for one.
    pub(crate) async fn admit_certificate(
        &self,
        agent_id: &str,
        peer: &PeerCertificate,
        purpose: Purpose,
        asking: bool,
    ) -> Result<(), ServerMessage> {
        let Some(certificates) = &self.certificates else { return Ok(()) };
        let newest = certificates.store.newest_for(agent_id).await.map_err(|e| {
            refusal(RefusalCode::Busy, format!("the server could not look up the agent's certificate now: {e}"))
        })?;
        let standing = Standing::of(newest.as_ref(), self.clock().now_ms());
        if let Standing::Revoked { serial_hex } = &standing {
            return Err(revoked(agent_id, serial_hex));
        }
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
            PeerCertificate::Absent => match standing {
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
            },
        }
    }

    /// `agent_id`'s certificates were revoked here (its whole chain): refused and its sessions
    /// cut off at once (other replicas follow within their revocation check).
    pub fn certificates_revoked(&self, agent_id: &str, serials_hex: &[String]) {
        for serial_hex in serials_hex {
            self.revoked_serials.insert(serial_hex, agent_id);
        }
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
        self.revoked_serials.replace(certificates.store.revoked_serials(now).await?);
        self.cut_off_certificates(now);
        Ok(())
    }

    /// Closes every session of an agent whose certificates were revoked, and every session
    /// whose certificate has expired.
    fn cut_off_certificates(&self, now_ms: i64) {
        let mut agents = self.write();
        for (agent_id, entry) in agents.iter_mut() {
            let Some(live) = entry.live.as_ref() else { continue };
            let bound = live.link.certificate.as_ref();
            let kick = if self.revoked_serials.covers_agent(agent_id)
                || bound.is_some_and(|(serial, _)| self.revoked_serials.contains(serial))
            {
                Kick::CertificateRevoked
            } else if bound.is_some_and(|(_, not_after_ms)| now_ms >= *not_after_ms) {
                Kick::CertificateExpired
            } else {
                continue;
            };
            tracing::info!(%agent_id, "{kick:?}: disconnected");
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

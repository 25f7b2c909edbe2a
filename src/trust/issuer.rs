//! The hub's certificate issuer: the agent CA signs, the store records, the audit log tells.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use toolgate_domain::Clock;
use toolgate_domain::audit::{AuditEvent, AuditOutcome, AuditSink, TargetType};
use toolgate_domain::fleet::wire::AgentCertificate;
use toolgate_fleet::{CertificateIssuer, CertificateReason};
use toolgate_store::CertStore;

use super::ca::AgentCa;

/// The largest signing request taken: a P-256 request is under 1 KiB; parsing more is waste.
const MAX_REQUEST_BYTES: usize = 16 * 1024;

pub struct Issuing {
    pub ca: Arc<AgentCa>,
    pub certs: Arc<dyn CertStore>,
    pub clock: Clock,
    pub audit: Arc<dyn AuditSink>,
    /// How long an agent's certificate is valid (`--agent-cert-lifetime`).
    pub lifetime_secs: i64,
}

impl Issuing {
    async fn issue_now(
        &self,
        agent_id: &str,
        csr_pem: &str,
        reason: CertificateReason,
    ) -> Result<AgentCertificate, String> {
        if csr_pem.len() > MAX_REQUEST_BYTES {
            return Err(format!(
                "a signing request of {} bytes, more than the {MAX_REQUEST_BYTES} one may be",
                csr_pem.len()
            ));
        }
        let now = self.clock.now_ms();
        let issued =
            self.ca.issue(agent_id, csr_pem, self.lifetime_secs, now, reason.as_str()).map_err(|e| e.to_string())?;
        // Recorded before it is handed out: no certificate exists that the inventory lacks.
        self.certs.record_issued(&issued.record).await.map_err(|e| e.to_string())?;
        let detail = format!(
            "serial {} ({}), valid until {} ms",
            issued.record.serial_hex,
            reason.as_str(),
            issued.record.not_after_ms
        );
        let event = AuditEvent::new(now, "ca.cert.issued", AuditOutcome::Success)
            .target(TargetType::Certificate, issued.record.serial_hex.clone())
            .about_agents([agent_id.to_string()])
            .detail(detail);
        self.audit.record(event);
        Ok(AgentCertificate {
            pem: issued.pem,
            ca_pem: self.ca.chain_pem().to_string(),
            not_after_ms: issued.record.not_after_ms,
        })
    }
}

impl CertificateIssuer for Issuing {
    fn issue<'a>(
        &'a self,
        agent_id: &'a str,
        csr_pem: &'a str,
        reason: CertificateReason,
    ) -> Pin<Box<dyn Future<Output = Result<AgentCertificate, String>> + Send + 'a>> {
        Box::pin(self.issue_now(agent_id, csr_pem, reason))
    }
}

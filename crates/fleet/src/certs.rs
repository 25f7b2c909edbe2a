//! Client certificates for agents (docs/trust.md): an enrollment or hello that carries a
//! signing request is answered with a certificate from the server's agent CA, when the server
//! has one. Issuing is the server's (its CA's key is sealed there); the hub only asks.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use toolgate_domain::fleet::wire::AgentCertificate;

use crate::hub::Hub;

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

impl Hub {
    /// Agents that ask are given certificates by `issuer`.
    pub fn with_certificates(mut self, issuer: Arc<dyn CertificateIssuer>) -> Self {
        self.certificates = Some(issuer);
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
        let (issuer, csr) = (self.certificates.as_ref()?, csr?);
        match issuer.issue(agent_id, csr, reason).await {
            Ok(certificate) => Some(certificate),
            Err(e) => {
                tracing::warn!(%agent_id, "no certificate issued: {e}");
                None
            }
        }
    }
}

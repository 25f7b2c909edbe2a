//! Certificates the agent CA issued: the store's trait (docs/trust.md). The CA's key is not
//! here: it is a sealed internal secret (docs/secrets.md), shared by replicas like any other.

use async_trait::async_trait;
use toolgate_domain::StoreError;
use toolgate_domain::certs::IssuedCert;
use toolgate_domain::groups::Reach;

pub(crate) type Result<T> = std::result::Result<T, StoreError>;

#[async_trait]
pub trait CertStore: Send + Sync {
    async fn record_issued(&self, cert: &IssuedCert) -> Result<()>;
    /// A page of the certificates issued to agents within `reach`, newest first, and how many
    /// there are in all.
    async fn issued(&self, reach: &Reach, limit: usize, offset: usize) -> Result<(Vec<IssuedCert>, u64)>;
}

/// The columns [`IssuedCert`] is read from, in order.
pub(crate) const CERT_COLUMNS: &str =
    "serial_hex, agent_id, ca_generation, not_before_ms, not_after_ms, issued_at_ms, reason";

//! Certificates the agent CA issued: the store's trait (docs/trust.md). The CA's key is not
//! here: it is a sealed internal secret (docs/secrets.md), shared by replicas like any other.

use async_trait::async_trait;
use toolgate_domain::StoreError;
use toolgate_domain::certs::{IssuedCert, Revocation};
use toolgate_domain::groups::Reach;

pub(crate) type Result<T> = std::result::Result<T, StoreError>;

#[async_trait]
pub trait CertStore: Send + Sync {
    async fn record_issued(&self, cert: &IssuedCert) -> Result<()>;
    /// A page of the certificates issued to agents within `reach`, newest first, and how many
    /// there are in all.
    async fn issued(&self, reach: &Reach, limit: usize, offset: usize) -> Result<(Vec<IssuedCert>, u64)>;
    /// Revokes the certificate `serial_hex` (lowercase) of an agent within `reach`, and with it
    /// every other certificate of that agent not revoked yet (its whole chain: an older,
    /// unexpired one must not outlive the revocation of the newest). The record named, and the
    /// serials this call revoked (empty: all already were). None when there is no such
    /// certificate the reach covers.
    async fn revoke(
        &self,
        serial_hex: &str,
        reach: &Reach,
        by: &str,
        reason: Option<&str>,
        now_ms: i64,
    ) -> Result<Option<(IssuedCert, Vec<String>)>>;
    /// The serials revoked that have not yet expired at `now_ms` (an expired certificate is
    /// refused anyway), each with its agent: what every replica refuses and cuts off.
    async fn revoked_serials(&self, now_ms: i64) -> Result<Vec<(String, String)>>;
    /// How many live (unexpired, unrevoked) certificates each CA generation has issued.
    async fn live_by_generation(&self, now_ms: i64) -> Result<Vec<(u32, u64)>>;
    /// The agent's newest certificate (the server's own question, unconfined).
    async fn newest_for(&self, agent_id: &str) -> Result<Option<IssuedCert>>;
}

/// The columns [`IssuedCert`] is written with, in order.
pub(crate) const CERT_COLUMNS: &str =
    "serial_hex, agent_id, ca_generation, not_before_ms, not_after_ms, issued_at_ms, reason";
/// The columns it is read from: those, then its revocation.
pub(crate) const CERT_READ_COLUMNS: &str = "serial_hex, agent_id, ca_generation, not_before_ms, not_after_ms, \
     issued_at_ms, reason, revoked_at_ms, revoked_by, revocation_reason";

/// The revocation read from its three columns (all null: not revoked).
pub(crate) fn revocation(at_ms: Option<i64>, by: Option<String>, reason: Option<String>) -> Option<Revocation> {
    at_ms.map(|revoked_at_ms| Revocation { revoked_at_ms, revoked_by: by.unwrap_or_default(), reason })
}

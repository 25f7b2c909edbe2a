//! Engine principals: the store's trait. A backend keeps each one as a principal of kind
//! `engine` (its roles and tokens are a principal's) beside its record (owner, reasons,
//! quota), and changes both in one transaction.

use async_trait::async_trait;
use toolgate_domain::StoreError;
use toolgate_domain::engines::{EngineRecord, EngineRefusal, NewEngine};

pub(crate) type Result<T> = std::result::Result<T, StoreError>;
pub(crate) type Refusable<T> = Result<std::result::Result<T, EngineRefusal>>;

/// What revoking did: the record as it is now, whether it changed, and how many live
/// credentials were revoked with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineRevoked {
    pub record: EngineRecord,
    pub changed: bool,
    pub credentials_revoked: u64,
}

/// A revocation as asked.
#[derive(Clone, Copy, Debug)]
pub struct RevokeEngine<'a> {
    pub principal_id: &'a str,
    pub reason: Option<&'a str>,
    /// Another engine principal that replaces it.
    pub superseded_by: Option<&'a str>,
    pub now: i64,
}

#[async_trait]
pub trait EngineStore: Send + Sync {
    /// Creates the principal and its record: refused when the name is taken or the owner is
    /// not a person.
    async fn create_engine(&self, new: NewEngine<'_>) -> Refusable<EngineRecord>;
    async fn engine(&self, principal_id: &str) -> Result<Option<EngineRecord>>;
    /// By id; revoked ones too when asked.
    async fn engines(&self, include_revoked: bool) -> Result<Vec<EngineRecord>>;
    /// Marks it revoked and revokes every credential it holds, atomically (a credential
    /// cache in front learns of it within its lifetime; PostgreSQL tells other replicas).
    /// Revoking a revoked one changes nothing.
    async fn revoke_engine(&self, revoke: RevokeEngine<'_>) -> Refusable<EngineRevoked>;
    /// Gives it a new owner, a person; returns the previous owner.
    async fn transfer_engine(&self, principal_id: &str, new_owner: &str) -> Refusable<(String, EngineRecord)>;
}

/// The columns [`EngineRecord`] is read from, in order.
pub(crate) const ENGINE_COLUMNS: &str = "principal_id, display_name, owner, justification, classification, created_at, \
     created_by, revoked_at, revoke_reason, superseded_by, requests_per_minute, concurrent_requests";

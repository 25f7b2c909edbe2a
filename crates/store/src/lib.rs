//! toolgate's store: one async trait per area (what the server may ask), implemented for the
//! embedded SQLite file in [`sqlite`] and for PostgreSQL (several replicas on one database) in
//! [`postgres`]. The SQL dialect, row mapping and migrations stay behind the traits.

mod audit_writer;
mod by_definition;
mod cached;
mod certs;
mod changes;
mod engines;
mod experience;
mod federated;
mod filtered;
mod fleet_work;
mod groups;
mod heard;
mod plugin_secrets;
pub mod postgres;
mod replica_state;
mod reviews;
mod rollouts;
mod rotations;
mod rules;
pub mod sqlite;
mod traits;
mod uploads;

use std::sync::Arc;

pub use audit_writer::AuditWriter;
pub use by_definition::{DefinitionPage, DefinitionQuery, DefinitionRow, ResponsePlace, RowsOf};
pub use cached::{CachedCredential, CachedCredentials};
pub use certs::CertStore;
pub use changes::{Change, ChangeFeed, next_change, next_change_until};
pub use engines::{EngineRevoked, EngineStore, RevokeEngine};
pub use experience::{
    Averaged, DAY_MS, DeviceExperience, ExperienceStore, ExperienceSwept, HOUR_MS, Observed, Occurrence, PackageSpan,
    PartValue, RecentRows, RecentWanted, Resolution, Retention, Saved,
};
pub use federated::{FederatedIdentity, FederatedStore, LinkRefusal, NewFederated, Seen, Tombstone};
pub use filtered::{FILTER_BUDGET, RowFilter};
pub use fleet_work::{
    Cancelled, Created, ExecutionHeader, Group, GroupOrder, Idempotency, NewExecution, QuarantineRecord, Reader,
    ResponsePage, ResponseQuery, ResponseRow, SILENT_PAST_DEADLINE, StepRecord, Taken, TargetRecord,
    UNRELEASED_AT_DEADLINE, WorkStore,
};
pub use groups::{GroupMember, GroupRoleRecord, GroupStore, GroupUpdate, NewGroup, group_labels, subtree};
pub use heard::{Heard, HeardApprovals};
pub use plugin_secrets::SecretStore;
pub use postgres::PostgresStore;
pub use replica_state::{MAX_ANNOUNCED_BYTES, ReplicaStore, SessionRecord, Shared};
pub use reviews::{Closed, RecordDecision, ReviewStore};
pub use rollouts::{RolloutState, RolloutStore, RolloutUnderWay};
pub use sqlite::SqliteStore;
pub use toolgate_domain::StoreError;
pub use traits::{
    ApprovalStore, AuditPage, AuditStore, ColumnCondition, ColumnValue, CredentialStore, FleetStore, HealthStore,
    PluginConfigStore, RowPage, RowSource, SignInRecord, SignInStore, StoreGauges, TagStore,
};
pub use uploads::{Claim, Finished, StoredContent, Swept, UploadStore};

/// The latency of every store operation, seconds (a Prometheus histogram).
pub const STORE_SECONDS: &str = "toolgate_store_seconds";

/// The file name of the embedded store inside a data directory.
pub const SQLITE_FILE_NAME: &str = "toolgate.sqlite3";

/// Every repository, as trait objects: what the server composes its services from.
#[derive(Clone)]
pub struct Repositories {
    pub credentials: Arc<dyn CredentialStore>,
    pub approvals: Arc<dyn ApprovalStore>,
    pub audit: Arc<dyn AuditStore>,
    pub tags: Arc<dyn TagStore>,
    pub plugin_config: Arc<dyn PluginConfigStore>,
    pub secrets: Arc<dyn SecretStore>,
    pub uploads: Arc<dyn UploadStore>,
    pub experience: Arc<dyn ExperienceStore>,
    pub certs: Arc<dyn CertStore>,
    pub groups: Arc<dyn GroupStore>,
    pub engines: Arc<dyn EngineStore>,
    pub federated: Arc<dyn FederatedStore>,
    pub reviews: Arc<dyn ReviewStore>,
    pub fleet: Arc<dyn FleetStore>,
    pub work: Arc<dyn WorkStore>,
    pub health: Arc<dyn HealthStore>,
    pub sign_in: Arc<dyn SignInStore>,
    /// What this server shares with the other replicas on its database (None: it is alone).
    pub shared: Option<Shared>,
}

impl Repositories {
    /// Every repository, backed by one store (each backend is every one of them).
    pub(crate) fn of<S>(store: S, shared: Option<Shared>) -> Self
    where
        S: CredentialStore
            + ApprovalStore
            + AuditStore
            + TagStore
            + PluginConfigStore
            + SecretStore
            + UploadStore
            + ExperienceStore
            + CertStore
            + GroupStore
            + EngineStore
            + FederatedStore
            + ReviewStore
            + FleetStore
            + WorkStore
            + HealthStore
            + SignInStore
            + Clone
            + 'static,
    {
        Repositories {
            credentials: Arc::new(store.clone()),
            approvals: Arc::new(store.clone()),
            audit: Arc::new(store.clone()),
            tags: Arc::new(store.clone()),
            plugin_config: Arc::new(store.clone()),
            secrets: Arc::new(store.clone()),
            uploads: Arc::new(store.clone()),
            experience: Arc::new(store.clone()),
            certs: Arc::new(store.clone()),
            groups: Arc::new(store.clone()),
            engines: Arc::new(store.clone()),
            federated: Arc::new(store.clone()),
            reviews: Arc::new(store.clone()),
            fleet: Arc::new(store.clone()),
            work: Arc::new(store.clone()),
            health: Arc::new(store.clone()),
            sign_in: Arc::new(store),
            shared,
        }
    }

    /// The same repositories, with authentication answered from a cache that lives `ttl_ms`.
    pub fn with_auth_cache(mut self, clock: toolgate_domain::Clock, ttl_ms: i64) -> Self {
        self.credentials =
            CachedCredentials::new(self.credentials, clock, ttl_ms).following(self.shared.as_ref().map(|s| &s.changes));
        self
    }
}

impl std::fmt::Debug for Repositories {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Repositories")
    }
}

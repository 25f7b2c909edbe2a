//! What the server may ask of a store, one trait per area. Every method is async: a backend
//! runs its I/O off the async threads, so a slow query never stalls the reactor.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::filtered::RowFilter;
use async_trait::async_trait;
use serde_json::{Map, Value};
use toolgate_domain::StoreError;
use toolgate_domain::approvals::{Approval, ArgumentBinding, Mint, PlanBinding, Recall, Review, ReviewRefusal};
use toolgate_domain::audit::{AuditEvent, AuditFilter};
use toolgate_domain::fleet::agent::{AgentAuth, InventoryStatus};
use toolgate_domain::fleet::wire::InventoryReport;
use toolgate_domain::fleet::{AgentSummary, EnrollRefusal, EnrollmentToken, HostFacts};
use toolgate_domain::groups::{GroupRefusal, Reach};
use toolgate_domain::lockout::Attempt;
use toolgate_domain::records::{Change, ConfigEntry, KillSwitch, Tag};
use toolgate_domain::tokens::{Authentication, NewToken, PrincipalRecord, Rotation, TokenRecord};

type Result<T> = std::result::Result<T, StoreError>;

/// Principals and their API tokens. Secrets are kept only as hashes.
#[async_trait]
pub trait CredentialStore: Send + Sync {
    async fn principal_count(&self) -> Result<i64>;
    /// Adds a principal, or replaces its roles.
    async fn put_principal(&self, name: &str, roles: &[String], now: i64) -> Result<()>;
    async fn principal(&self, name: &str) -> Result<Option<PrincipalRecord>>;
    async fn principals(&self) -> Result<Vec<PrincipalRecord>>;
    /// Removes a person and revokes its tokens; false when there is none. Refused for an
    /// engine principal (it is revoked, never removed) and for a person who owns live ones.
    async fn remove_principal(
        &self,
        name: &str,
        now: i64,
    ) -> Result<std::result::Result<bool, toolgate_domain::engines::EngineRefusal>>;
    /// Creates a token; returns its record and the secret, which is never stored.
    async fn create_token(&self, new: NewToken<'_>) -> Result<(TokenRecord, String)>;
    async fn authenticate(&self, secret: &str, now: i64) -> Result<Authentication>;
    /// The answer an authentication cache holds for `secret` while it may still serve it
    /// (None: no cache in front of this store, or nothing valid cached). Synchronous and
    /// copy-free: the hot path asks this first and [`CredentialStore::authenticate`] on a miss.
    fn cached(&self, _secret: &str) -> Option<Arc<crate::CachedCredential>> {
        None
    }
    /// Drops whatever an authentication cache in front holds, after a change made beside
    /// this store (an engine principal's revocation): nothing without a cache.
    fn forget_cached(&self) {}
    async fn token(&self, id: &str) -> Result<Option<TokenRecord>>;
    /// Mints the successor of `predecessor` (same principal and tier, expiring at
    /// `successor_expires_at`) and shortens the predecessor's life to the overlap, atomically.
    /// Returns the successor and its secret.
    async fn rotate_token(
        &self,
        predecessor: &TokenRecord,
        overlap_secs: i64,
        successor_expires_at: i64,
        now: i64,
    ) -> Result<(TokenRecord, String)>;
    /// The rotation whose successor is `successor_id`.
    async fn rotation(&self, successor_id: &str) -> Result<Option<Rotation>>;
    /// `principal`'s rotations, newest first.
    async fn rotations(&self, principal: &str) -> Result<Vec<Rotation>>;
    /// Resolves as expired every unresolved rotation whose overlap has ended by `now` (its
    /// predecessor expired by itself); returns them, for their audit rows.
    async fn resolve_lapsed_rotations(&self, now: i64) -> Result<Vec<Rotation>>;
    /// Confirms a pending rotation with the successor's secret: the predecessor is revoked and
    /// the rotation resolved. Returns the predecessor's id, or None when `secret` is not the
    /// successor's or there is no pending rotation to it.
    async fn confirm_rotation(
        &self,
        successor_id: &str,
        secret: &str,
        principal: &str,
        now: i64,
    ) -> Result<Option<String>>;
    async fn tokens(&self, principal: Option<&str>) -> Result<Vec<TokenRecord>>;
    /// Revokes a token; false when there is no such (unrevoked) token.
    async fn revoke_token(&self, id: &str, now: i64) -> Result<bool>;
    /// Grants `role` on a management group (a principal's roles are credentials: a cache in
    /// front forgets at once); false when the principal held it there already.
    async fn assign_group_role(
        &self,
        principal: &str,
        group_id: &str,
        role: &str,
        change: Change<'_>,
    ) -> Result<std::result::Result<bool, GroupRefusal>>;
    /// Takes it away; false when the principal did not hold it there.
    async fn unassign_group_role(&self, principal: &str, group_id: &str, role: &str) -> Result<bool>;
}

/// How principals sign in to the console: password hash, TOTP factor, failed attempts.
#[async_trait]
pub trait SignInStore: Send + Sync {
    /// None when the principal does not exist.
    async fn sign_in_record(&self, principal: &str) -> Result<Option<SignInRecord>>;
    /// Sets the password hash (a PHC string); false when the principal does not exist.
    async fn set_password(&self, principal: &str, hash: &str) -> Result<bool>;
    /// Starts TOTP enrollment with a new secret, unconfirmed (a confirmed factor is replaced
    /// only through [`SignInStore::reset_totp`]).
    async fn begin_totp(&self, principal: &str, secret: &str) -> Result<()>;
    async fn confirm_totp(&self, principal: &str, now_ms: i64) -> Result<()>;
    /// Removes the factor (the console asks for a new enrollment at the next sign-in).
    async fn reset_totp(&self, principal: &str) -> Result<bool>;
    /// Takes a TOTP time step, atomically: false when this step (or a later one) was taken
    /// already, so that each code is accepted once.
    async fn take_totp_step(&self, principal: &str, step: i64) -> Result<bool>;
    /// Counts an attempt to prove who the principal is (a password, a code) as failed before
    /// it is checked, atomically with the lock it brings on
    /// ([`toolgate_domain::lockout::locked_until`]): a locked principal's attempt is not
    /// counted and must not be checked. [`SignInStore::sign_in_succeeded`] clears the count.
    async fn count_attempt(&self, principal: &str, now_ms: i64) -> Result<Attempt>;
    /// Clears the failed attempts after a successful proof.
    async fn sign_in_succeeded(&self, principal: &str) -> Result<()>;
}

/// A principal's sign-in state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SignInRecord {
    pub password_hash: Option<String>,
    pub totp_secret: Option<String>,
    pub totp_confirmed: bool,
    pub failed_attempts: i64,
    pub locked_until_ms: i64,
}

/// Human approvals. Minting is deduplicated and capped; consumption happens at most once.
#[async_trait]
pub trait ApprovalStore: Send + Sync {
    async fn approval(&self, id: &str) -> Result<Option<Approval>>;
    /// Newest first; filtered by status and submitter when given; `offset` rows skipped.
    async fn approvals(
        &self,
        status: Option<&str>,
        submitter: Option<&str>,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<Approval>>;
    /// Mints (or finds again) the pending ticket for this submitter, tool and arguments, on
    /// `surface` (MCP's tool calls, or their REST twin's), which alone may redeem it.
    async fn mint(
        &self,
        surface: &str,
        tool: &str,
        submitter: &str,
        arguments: &ArgumentBinding,
        now: i64,
    ) -> Result<Mint>;
    /// A person approves or rejects; never their own request.
    async fn review(&self, review: Review<'_>) -> Result<std::result::Result<Approval, ReviewRefusal>>;
    /// Links a ticket to the plan execution its call started when it was minted.
    async fn link_plan(&self, approval_id: &str, execution_id: &str) -> Result<()>;
    /// The plan a ticket's call started, and what was approved of it.
    async fn plan_of(&self, approval_id: &str) -> Result<Option<PlanBinding>>;
    /// Records the plans a person approves (each agent's digest), before the approval itself;
    /// false when the ticket has no plan or is no longer pending.
    async fn bind_plans(&self, approval_id: &str, approved: &BTreeMap<String, String>) -> Result<bool>;
    /// Checks the ticket against this exact call on `surface` and consumes it atomically.
    async fn recall(
        &self,
        surface: &str,
        id: &str,
        tool: &str,
        caller: &str,
        arguments: &ArgumentBinding,
        now: i64,
    ) -> Result<Recall>;
}

/// A page of the audit log, newest first: each row with its id (the next page is the rows
/// older than the last one's), and how many rows match in all.
#[derive(Debug, Default)]
pub struct AuditPage {
    pub entries: Vec<(i64, AuditEvent)>,
    pub matched: usize,
}

#[async_trait]
pub trait AuditStore: Send + Sync {
    /// Writes a batch in one transaction (the audit writer's unit of work). `durable`: the
    /// commit must survive a power loss before this returns (a state-changing call waits on
    /// it); otherwise surviving a crash of the process is enough. The batch is shared, not
    /// copied: a backend that writes on another thread takes it along, a retry passes it again.
    async fn append(&self, events: Arc<[AuditEvent]>, durable: bool) -> Result<()>;
    /// Newest first.
    async fn query(&self, filter: &AuditFilter) -> Result<Vec<AuditEvent>>;
    /// The same rows with their ids, and how many match on every page (a listing's page).
    async fn page(&self, filter: &AuditFilter) -> Result<AuditPage>;
    /// Deletes the rows older than `before_ms` (the retention); returns how many.
    async fn prune(&self, before_ms: i64) -> Result<u64>;
}

#[async_trait]
pub trait TagStore: Send + Sync {
    async fn agent_tags(&self, agent_id: &str) -> Result<Vec<Tag>>;
    /// Sets a tag; returns the value it replaced.
    async fn set_agent_tag(&self, agent_id: &str, key: &str, value: &str, change: Change<'_>)
    -> Result<Option<String>>;
    /// Deletes a tag; returns its value if it existed.
    async fn delete_agent_tag(&self, agent_id: &str, key: &str) -> Result<Option<String>>;
}

#[async_trait]
pub trait PluginConfigStore: Send + Sync {
    /// Every value, or one plugin's, ordered by plugin then key.
    async fn list(&self, plugin: Option<&str>) -> Result<Vec<ConfigEntry>>;
    async fn get(&self, plugin: &str, key: &str) -> Result<Option<ConfigEntry>>;
    /// Sets a value; returns the one it replaced.
    async fn set(&self, plugin: &str, key: &str, value: &str, change: Change<'_>) -> Result<Option<String>>;
    /// Deletes a value; returns it if it existed.
    async fn delete(&self, plugin: &str, key: &str) -> Result<Option<String>>;
    async fn kill_switch(&self, plugin: &str, action: Option<&str>) -> Result<KillSwitch>;
    /// Every engaged switch: what the fleet refuses to run (other replicas are told when one
    /// is set, and read these again).
    async fn engaged_kill_switches(&self) -> Result<Vec<KillSwitch>>;
    async fn set_kill_switch(
        &self,
        plugin: &str,
        action: Option<&str>,
        enabled: bool,
        reason: Option<&str>,
        change: Change<'_>,
    ) -> Result<KillSwitch>;
}

#[async_trait]
pub trait HealthStore: Send + Sync {
    /// Ready to take writes: the store is the one that was opened and a write reaches it.
    async fn check_ready(&self, now_ms: i64) -> Result<()>;
    /// What an operator watches, counted now (the health resource and /metrics).
    async fn gauges(&self, now_secs: i64) -> Result<StoreGauges>;
}

/// Counts the store answers for monitoring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreGauges {
    /// Approval tickets waiting for a person (unexpired).
    pub approvals_pending: u64,
    /// Executions with at least one agent yet to answer (pending or running).
    pub executions_in_flight: u64,
}

/// A condition the store evaluates itself, where the rows are: one column of the row equal
/// (or not equal) to a value. Columns are declared names (checked before they get here).
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnCondition {
    pub column: String,
    pub equal: bool,
    pub value: ColumnValue,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ColumnValue {
    Text(String),
    Integer(i64),
}

/// Whose inventory rows to read: one table, of one agent or of every agent `reach` covers.
#[derive(Clone, Debug)]
pub struct RowSource {
    pub table: String,
    pub agent_id: Option<String>,
    pub reach: Reach,
}

/// A page of rows (inventory or responses), each with its agent id; `more` when rows past the page matched.
#[derive(Debug, Default)]
pub struct RowPage {
    pub rows: Vec<(String, Map<String, Value>)>,
    pub more: bool,
    /// Every row that matches, on every page (what the pages after this one hold is
    /// `matched - offset - rows`); a lower bound when not `counted_all`.
    pub matched: usize,
    /// `matched` counts every row that matches: false when a filter matched row by row
    /// stopped counting a while past the page (`filtered::COUNT_AHEAD_ROWS`).
    pub counted_all: bool,
    /// A [`RowFilter`]'s time budget ran out before every row was looked at: `rows` is what
    /// it found so far, `more` and `matched` unknown.
    pub over_budget: bool,
}

/// Enrollment tokens, agents and the inventory they report.
#[async_trait]
pub trait FleetStore: Send + Sync {
    /// Mints an enrollment token; returns it and its secret, which is never stored.
    async fn create_enrollment_token(
        &self,
        expires_at_ms: i64,
        uses_allowed: i64,
        now_ms: i64,
    ) -> Result<(EnrollmentToken, String)>;
    async fn enrollment_tokens(&self) -> Result<Vec<EnrollmentToken>>;
    /// Uses the token once and creates the agent, atomically: its id and credential.
    async fn enroll(&self, secret: &str, now_ms: i64) -> Result<std::result::Result<(String, String), EnrollRefusal>>;
    async fn authenticate_agent(&self, agent_id: &str, credential: &str) -> Result<AgentAuth>;
    /// Every agent; `status` is Offline or Revoked (whether one is online is the hub's to say).
    async fn agents(&self) -> Result<Vec<AgentSummary>>;
    /// One agent, as [`FleetStore::agents`] lists it.
    async fn agent(&self, agent_id: &str) -> Result<Option<AgentSummary>>;
    async fn save_facts(&self, agent_id: &str, facts: &HostFacts, collected_at_ms: i64) -> Result<()>;
    async fn save_last_seen(&self, seen: &[(String, i64)]) -> Result<()>;
    /// The agent connected to `replica` (and was seen then).
    async fn agent_connected(&self, agent_id: &str, replica: &str, at_ms: i64) -> Result<()>;
    /// The agent's connection to `replica` ended (a newer one elsewhere is left as it is).
    async fn agent_disconnected(&self, agent_id: &str, replica: &str, at_ms: i64) -> Result<()>;
    /// Agents connected to a replica other than `replica` and seen since `since_ms`:
    /// (agent id, replica, last seen).
    async fn connected_elsewhere(&self, replica: &str, since_ms: i64) -> Result<Vec<(String, String, i64)>>;
    /// Revokes an agent; false when there is no such unrevoked agent.
    async fn revoke_agent(&self, agent_id: &str, now_ms: i64) -> Result<bool>;
    /// The agents revoked at or after `since_ms` (by this server or the console).
    async fn revoked_since(&self, since_ms: i64) -> Result<Vec<String>>;
    /// Replaces the agent's copy of one table.
    async fn save_inventory(&self, agent_id: &str, report: InventoryReport, received_at_ms: i64) -> Result<()>;
    /// What one agent last reported of each table.
    async fn inventory_status(&self, agent_id: &str) -> Result<Vec<InventoryStatus>>;
    /// Per table reported by any agent `reach` covers: how many agents reported it, and how
    /// many of those said it is not available on their host.
    async fn inventory_coverage(&self, reach: &Reach) -> Result<Vec<(String, i64, i64)>>;
    /// Rows of `source.table` (one agent's, or every agent's its reach covers) that meet every
    /// condition and that `filter` (when given) keeps, in agent order. Without a filter SQL
    /// cuts the page; with one the rows are read in chunks and filtered between reads, never
    /// holding the store while matching, within the filter's budget (past it the page is
    /// `over_budget`). Confinement is in the SQL, so pages are cut after it.
    async fn inventory_rows(
        &self,
        source: &RowSource,
        conditions: &[ColumnCondition],
        filter: Option<RowFilter>,
        offset: usize,
        limit: usize,
    ) -> Result<RowPage>;
    /// Every tag of every agent within `reach`: (agent id, key, value), by agent and key.
    async fn all_tags(&self, reach: &Reach) -> Result<Vec<(String, String, String)>>;
    /// The value of tag `key` on each agent within `reach` that has it: (agent id, value), in
    /// agent order by the store's collation.
    async fn tag_values(&self, reach: &Reach, key: &str) -> Result<Vec<(String, String)>>;
}

//! What the replicas of one deployment share beyond the records: secrets made once, marks
//! that something was used once, and the MCP sessions of the handshake era. Only a shared
//! database has it; a single server keeps these in memory and in its data directory.

use std::sync::Arc;

use async_trait::async_trait;
use toolgate_domain::StoreError;

use crate::changes::{Change, ChangeFeed};

type Result<T> = std::result::Result<T, StoreError>;

/// A handshake-era MCP session as every replica sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRecord {
    pub id: String,
    pub principal: String,
    pub version: String,
    /// The client's capabilities, as JSON text.
    pub client_capabilities: String,
    pub last_seen_ms: i64,
    /// The replica that opened it.
    pub replica: String,
}

#[async_trait]
pub trait ReplicaStore: Send + Sync {
    /// The secret called `name`: the one stored, or `fresh` when this call stores it first.
    async fn shared_secret(&self, name: &str, fresh: &[u8]) -> Result<Vec<u8>>;
    /// Marks `key` used until `expires_at_secs` (forgotten after); false when it was already.
    async fn use_once(&self, key: &str, expires_at_secs: i64, now_secs: i64) -> Result<bool>;
    /// Records a new session, and forgets those idle since before `idle_before_ms`.
    async fn put_session(&self, session: &SessionRecord, idle_before_ms: i64) -> Result<()>;
    async fn session(&self, id: &str) -> Result<Option<SessionRecord>>;
    async fn touch_session(&self, id: &str, last_seen_ms: i64) -> Result<()>;
    /// False when there was no such session.
    async fn remove_session(&self, id: &str) -> Result<bool>;
    /// Tells the other replicas of `change` now.
    async fn announce(&self, change: Change) -> Result<()>;
}

/// The largest change a notification carries (PostgreSQL's limit is 8000 bytes).
pub const MAX_ANNOUNCED_BYTES: usize = 7_900;

/// What a replica shares with the others: their changes, and the state above.
#[derive(Clone)]
pub struct Shared {
    pub changes: Arc<ChangeFeed>,
    pub state: Arc<dyn ReplicaStore>,
    /// This replica's name.
    pub replica: Arc<str>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("replica", &self.replica).finish_non_exhaustive()
    }
}

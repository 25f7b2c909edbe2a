//! The embedded store: one SQLite file (WAL, durable commits), migrations at open, one module
//! per table family.

mod approvals;
mod audit;
mod groups;
mod plugin_config;
mod tags;
mod tokens;

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::{Connection, OptionalExtension, Params};

pub use approvals::{APPROVAL_TTL_SECS, Approval, ApprovalStatus, Mint, Recall, ReviewRefusal};
pub use audit::{AuditEntry, AuditFilter};
pub use groups::ManagementGroup;
pub use plugin_config::{ConfigEntry, KillSwitch};
pub use tags::Tag;
pub use tokens::{Authentication, PrincipalRecord, TOKEN_PREFIX, TokenRecord, hex, random_bytes};

/// `N` random bytes, hex-encoded.
pub fn random_hex<const N: usize>() -> String {
    hex(&random_bytes::<N>())
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("the store's lock was poisoned by a panic in another request")]
    Poisoned,
}

/// A cheap, cloneable handle to the database.
#[derive(Clone, Debug)]
pub struct Store {
    conn: Arc<Mutex<Connection>>,
}

const MIGRATIONS: &[&str] = &[
    // 1: plugin configuration and kill switches.
    "CREATE TABLE plugin_config (
        plugin TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        updated_by TEXT NOT NULL,
        PRIMARY KEY (plugin, key)
    );
    CREATE TABLE plugin_kill_switch (
        plugin TEXT NOT NULL,
        action TEXT NOT NULL DEFAULT '',
        engaged INTEGER NOT NULL,
        reason TEXT,
        updated_at INTEGER NOT NULL,
        updated_by TEXT NOT NULL,
        PRIMARY KEY (plugin, action)
    );",
    // 2: agent tags.
    "CREATE TABLE agent_tag (
        agent_id TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        updated_by TEXT NOT NULL,
        PRIMARY KEY (agent_id, key)
    );",
    // 3: principals and their API tokens (stored hashed, never in clear).
    "CREATE TABLE principal (
        name TEXT PRIMARY KEY,
        roles TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE api_token (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        principal TEXT NOT NULL,
        tier TEXT,
        secret_hash TEXT NOT NULL UNIQUE,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        revoked_at INTEGER
    );",
    // 4: human approvals, the audit log, management groups, token rotation.
    "CREATE TABLE approval (
        id TEXT PRIMARY KEY,
        definition TEXT NOT NULL,
        tool TEXT NOT NULL,
        surface TEXT NOT NULL,
        submitter TEXT NOT NULL,
        canonical_args TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'consumed')),
        submitted_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        reviewer TEXT,
        reviewed_at INTEGER,
        review_comment TEXT,
        consumed_at INTEGER
    );
    CREATE UNIQUE INDEX approval_pending_once ON approval (submitter, definition, canonical_args) WHERE status = 'pending';
    CREATE INDEX approval_by_status ON approval (status, submitter);
    CREATE TABLE audit (
        id INTEGER PRIMARY KEY,
        at_ms INTEGER NOT NULL,
        principal TEXT,
        token_id TEXT,
        action TEXT NOT NULL,
        target TEXT,
        result TEXT NOT NULL,
        detail TEXT,
        correlation_id TEXT
    );
    CREATE INDEX audit_by_time ON audit (at_ms);
    CREATE INDEX audit_by_correlation ON audit (correlation_id);
    CREATE TABLE management_group (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        description TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    INSERT INTO management_group (id, name, description, created_at)
        VALUES ('all', 'All agents', 'Every enrolled agent; the group every scope starts from.', 0);
    ALTER TABLE api_token ADD COLUMN rotated_from TEXT;",
];

impl Store {
    /// Opens (creating if needed) the database file and brings its schema up to date.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Self::migrate(conn)
    }

    pub fn open_in_memory() -> Result<Self, StoreError> {
        Self::migrate(Connection::open_in_memory()?)
    }

    fn migrate(mut conn: Connection) -> Result<Self, StoreError> {
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            let tx = conn.transaction()?;
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)?;
            tx.commit()?;
        }
        Ok(Self { conn: Arc::new(Mutex::new(conn)) })
    }

    /// The connection, for one short piece of work (SQLite on a local file: microseconds).
    fn conn(&self) -> Result<MutexGuard<'_, Connection>, StoreError> {
        self.conn.lock().map_err(|_| StoreError::Poisoned)
    }

    /// Reads the current value with `select`, then runs `upsert`, in one transaction:
    /// returns the value that was replaced.
    fn replace_returning_previous(
        &self,
        select: &str,
        key: impl Params,
        upsert: &str,
        row: impl Params,
    ) -> Result<Option<String>, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction()?;
        let previous: Option<String> = tx.query_row(select, key, |r| r.get(0)).optional()?;
        tx.execute(upsert, row)?;
        tx.commit()?;
        Ok(previous)
    }

    /// Runs a `DELETE ... RETURNING value`: the deleted value, if there was one.
    fn delete_returning(&self, sql: &str, key: impl Params) -> Result<Option<String>, StoreError> {
        let conn = self.conn()?;
        Ok(conn.query_row(sql, key, |r| r.get(0)).optional()?)
    }
}

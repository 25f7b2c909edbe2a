//! The embedded store: one SQLite file (WAL, durable commits), migrations from
//! `migrations/sqlite/` applied at open. Every query runs on tokio's blocking pool, never on
//! an async worker thread.

mod approvals;
mod audit;
mod by_definition;
mod certs;
mod confinement;
mod credentials;
mod engines;
mod executions;
mod experience;
mod experience_batch;
mod experience_parts;
mod experience_recent;
mod federated;
mod fleet;
mod fleet_work;
mod groups;
mod json_rows;
mod plugin_config;
mod plugin_secrets;
mod readers;
mod responses;
mod reviews;
mod rollouts;
mod rotations;
mod sign_in;
mod tags;
mod uploads;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Params, params};
use toolgate_domain::StoreError;

use crate::{HealthStore, Repositories, STORE_SECONDS, StoreGauges};

/// The schema, one file per version, in order. A database's `user_version` says how many ran.
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_plugin_config", include_str!("../../migrations/sqlite/0001_plugin_config.sql")),
    ("0002_agent_tags", include_str!("../../migrations/sqlite/0002_agent_tags.sql")),
    ("0003_principals_tokens", include_str!("../../migrations/sqlite/0003_principals_tokens.sql")),
    ("0004_approvals_audit_groups", include_str!("../../migrations/sqlite/0004_approvals_audit_groups.sql")),
    ("0005_readiness", include_str!("../../migrations/sqlite/0005_readiness.sql")),
    ("0006_approval_sensitive_digest", include_str!("../../migrations/sqlite/0006_approval_sensitive_digest.sql")),
    ("0007_fleet", include_str!("../../migrations/sqlite/0007_fleet.sql")),
    ("0008_inventory_indexes", include_str!("../../migrations/sqlite/0008_inventory_indexes.sql")),
    ("0009_executions", include_str!("../../migrations/sqlite/0009_executions.sql")),
    ("0010_console_sign_in", include_str!("../../migrations/sqlite/0010_console_sign_in.sql")),
    ("0011_agent_presence", include_str!("../../migrations/sqlite/0011_agent_presence.sql")),
    ("0012_execution_keys", include_str!("../../migrations/sqlite/0012_execution_keys.sql")),
    ("0013_audit_target_type", include_str!("../../migrations/sqlite/0013_audit_target_type.sql")),
    ("0014_response_arrival", include_str!("../../migrations/sqlite/0014_response_arrival.sql")),
    ("0015_approval_surface", include_str!("../../migrations/sqlite/0015_approval_surface.sql")),
    ("0016_management_groups", include_str!("../../migrations/sqlite/0016_management_groups.sql")),
    ("0017_audit_agents", include_str!("../../migrations/sqlite/0017_audit_agents.sql")),
    ("0018_engine_principals", include_str!("../../migrations/sqlite/0018_engine_principals.sql")),
    ("0019_access_reviews", include_str!("../../migrations/sqlite/0019_access_reviews.sql")),
    ("0020_federated_identities", include_str!("../../migrations/sqlite/0020_federated_identities.sql")),
    ("0021_idp_grants", include_str!("../../migrations/sqlite/0021_idp_grants.sql")),
    ("0022_plugin_secrets", include_str!("../../migrations/sqlite/0022_plugin_secrets.sql")),
    ("0023_uploads", include_str!("../../migrations/sqlite/0023_uploads.sql")),
    ("0024_issued_certs", include_str!("../../migrations/sqlite/0024_issued_certs.sql")),
    ("0025_cert_revocation", include_str!("../../migrations/sqlite/0025_cert_revocation.sql")),
    ("0026_federated_tombstones", include_str!("../../migrations/sqlite/0026_federated_tombstones.sql")),
    ("0027_quarantine_enforcement", include_str!("../../migrations/sqlite/0027_quarantine_enforcement.sql")),
    ("0028_audit_without_indexes", include_str!("../../migrations/sqlite/0028_audit_without_indexes.sql")),
    ("0029_approval_plans", include_str!("../../migrations/sqlite/0029_approval_plans.sql")),
    ("0030_rollouts", include_str!("../../migrations/sqlite/0030_rollouts.sql")),
    ("0031_token_toolsets", include_str!("../../migrations/sqlite/0031_token_toolsets.sql")),
    ("0032_experience", include_str!("../../migrations/sqlite/0032_experience.sql")),
    ("0033_experience_rollups", include_str!("../../migrations/sqlite/0033_experience_rollups.sql")),
    ("0034_experience_signals", include_str!("../../migrations/sqlite/0034_experience_signals.sql")),
    ("0035_experience_apps", include_str!("../../migrations/sqlite/0035_experience_apps.sql")),
    ("0036_experience_interfaces", include_str!("../../migrations/sqlite/0036_experience_interfaces.sql")),
    ("0037_experience_app_packages", include_str!("../../migrations/sqlite/0037_experience_app_packages.sql")),
    ("0038_experience_revision", include_str!("../../migrations/sqlite/0038_experience_revision.sql")),
    ("0039_experience_revision_index", include_str!("../../migrations/sqlite/0039_experience_revision_index.sql")),
];

/// A cheap, cloneable handle to the database.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
    /// Read-only connections for reads that need not wait for the writer (a file's store).
    readers: Option<Arc<readers::Readers>>,
    /// Experience reports and what they show of the signals, waiting for their group
    /// commit (experience_batch).
    experience_writes: experience_batch::WriteQueue,
    /// The file it opened, and that file's identity then (device, inode).
    file: Option<(PathBuf, (u64, u64))>,
}

fn identity(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).map(|m| (m.dev(), m.ino()))
}

pub(crate) fn db(e: rusqlite::Error) -> StoreError {
    StoreError::backend(e)
}

fn poisoned() -> StoreError {
    StoreError::Unavailable("the store's lock was poisoned by a panic in another request".into())
}

impl SqliteStore {
    /// Opens (creating if needed) the database file and brings its schema up to date.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let conn = Connection::open(path).map_err(db)?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(db)?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(db)?;
        // Savepoints' journals in memory: each report of a group commit has its savepoint, and
        // every page it changes was written to a temporary file first (past 64 KiB, SQLite's
        // default), as much again as the WAL was written.
        conn.pragma_update(None, "temp_store", "MEMORY").map_err(db)?;
        conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(db)?;
        let conn = Self::migrate(conn)?;
        let file = identity(path).map_err(StoreError::backend)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            readers: Some(Arc::new(readers::Readers::open(path)?)),
            experience_writes: Default::default(),
            file: Some((path.to_path_buf(), file)),
        })
    }

    pub fn open_in_memory() -> Result<Self, StoreError> {
        let conn = Self::migrate(Connection::open_in_memory().map_err(db)?)?;
        Ok(Self { conn: Arc::new(Mutex::new(conn)), readers: None, experience_writes: Default::default(), file: None })
    }

    fn migrate(mut conn: Connection) -> Result<Connection, StoreError> {
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(db)?;
        if version as usize > MIGRATIONS.len() {
            return Err(StoreError::Unavailable(format!(
                "the database is at schema version {version}, newer than this binary's {}: upgrade toolgate",
                MIGRATIONS.len()
            )));
        }
        for (i, (_, sql)) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            let tx = conn.transaction().map_err(db)?;
            tx.execute_batch(sql).map_err(db)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64).map_err(db)?;
            tx.commit().map_err(db)?;
        }
        Ok(conn)
    }

    /// Every repository, backed by this one file.
    pub fn repositories(&self) -> Repositories {
        Repositories::of(self.clone(), None)
    }

    /// Writes a consistent copy of the whole store to `target` (a new file), while the store
    /// stays in use: SQLite's `VACUUM INTO` reads one snapshot (other writers go on meanwhile,
    /// under WAL) and writes a compact, self-contained database file.
    pub async fn backup_to(&self, target: &Path) -> Result<(), StoreError> {
        let target = target
            .to_str()
            .map(str::to_string)
            .ok_or_else(|| StoreError::Unavailable(format!("{}: the backup path must be UTF-8", target.display())))?;
        self.run(move |c| c.execute("VACUUM INTO ?1", params![target]).map(drop)).await
    }

    /// Runs `work` on the connection, on the blocking pool.
    pub(crate) async fn run<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let conn = self.conn.clone();
        let started = std::time::Instant::now();
        let joined = tokio::task::spawn_blocking(move || {
            let mut guard = conn.lock().map_err(|_| poisoned())?;
            work(&mut guard).map_err(db)
        })
        .await;
        // Waiting for the blocking pool and the connection included: what a request waits.
        metrics::histogram!(STORE_SECONDS).record(started.elapsed().as_secs_f64());
        joined.map_err(|e| StoreError::Unavailable(format!("a store task failed: {e}")))?
    }

    /// Runs `work`, which only reads, on a reader beside the writer (see `readers`), or on the
    /// connection of a store in memory. It sees what was committed before it began.
    pub(crate) async fn read<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let Some(readers) = self.readers.clone() else { return self.run(work).await };
        let started = std::time::Instant::now();
        let joined = tokio::task::spawn_blocking(move || readers.with(work)).await;
        metrics::histogram!(STORE_SECONDS).record(started.elapsed().as_secs_f64());
        joined.map_err(|e| StoreError::Unavailable(format!("a store task failed: {e}")))?
    }

    /// Breaks one area on purpose (its tables are renamed away), so that tests reach every
    /// store-fault path with a real store.
    #[cfg(feature = "fault-injection")]
    pub async fn break_area(&self, area: Area) -> Result<(), StoreError> {
        let sql: String = area.tables().iter().map(|t| format!("ALTER TABLE {t} RENAME TO broken_{t};")).collect();
        self.run(move |conn| conn.execute_batch(&sql)).await
    }
}

#[async_trait]
impl HealthStore for SqliteStore {
    async fn check_ready(&self, now_ms: i64) -> Result<(), StoreError> {
        if let Some((path, opened)) = &self.file {
            match identity(path) {
                Ok(now) if now == *opened => {}
                Ok(_) => {
                    return Err(StoreError::Unavailable(format!(
                        "{} was replaced since the server opened it: restart the server",
                        path.display()
                    )));
                }
                Err(e) => {
                    return Err(StoreError::Unavailable(format!(
                        "{} is gone ({e}): writes would be lost; restore it and restart the server",
                        path.display()
                    )));
                }
            }
        }
        self.run(move |c| {
            c.execute(
                "INSERT INTO readiness (id, checked_at_ms) VALUES (1, ?1)
                 ON CONFLICT (id) DO UPDATE SET checked_at_ms = excluded.checked_at_ms",
                params![now_ms],
            )
            .map(drop)
        })
        .await
    }

    async fn gauges(&self, now_secs: i64) -> Result<StoreGauges, StoreError> {
        self.run(move |c| {
            let approvals_pending: i64 = c.query_row(
                "SELECT count(*) FROM approval WHERE status = 'pending' AND expires_at > ?1",
                params![now_secs],
                |r| r.get(0),
            )?;
            let executions_in_flight: i64 = c.query_row(
                "SELECT count(DISTINCT execution_id) FROM execution_target WHERE status IN ('pending', 'running')",
                [],
                |r| r.get(0),
            )?;
            Ok(StoreGauges {
                approvals_pending: approvals_pending as u64,
                executions_in_flight: executions_in_flight as u64,
            })
        })
        .await
    }
}

/// The areas a test can break (see [`SqliteStore::break_area`]).
#[cfg(feature = "fault-injection")]
#[derive(Clone, Copy, Debug)]
pub enum Area {
    Credentials,
    Approvals,
    Audit,
    Tags,
    PluginConfig,
    Groups,
    Fleet,
    /// Executions, responses and compliance outcomes.
    Work,
    /// The certificates the agent CA issued.
    Certs,
}

#[cfg(feature = "fault-injection")]
impl Area {
    fn tables(self) -> &'static [&'static str] {
        match self {
            Area::Credentials => &["api_token", "principal"],
            Area::Approvals => &["approval"],
            Area::Audit => &["audit"],
            Area::Tags => &["agent_tag"],
            Area::PluginConfig => &["plugin_config", "plugin_kill_switch"],
            Area::Groups => &["management_group"],
            Area::Fleet => &["agent", "enrollment_token", "inventory_table", "inventory_row"],
            Area::Work => &["execution", "execution_target", "execution_step", "response", "compliance_result"],
            Area::Certs => &["issued_cert"],
        }
    }
}

/// Runs `work` with commits that skip the fsync (WAL, `synchronous=NORMAL`): a commit is in
/// the WAL file, so it survives the process being killed, but not necessarily a power loss.
/// For rows that are sent again if lost (agents' reports) or that nobody waits on (the audit
/// rows of reads); every other write keeps the connection's `FULL`.
fn without_fsync<T>(
    c: &mut Connection,
    work: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    c.pragma_update(None, "synchronous", "NORMAL")?;
    let done = work(c);
    c.pragma_update(None, "synchronous", "FULL")?;
    done
}

/// Reads the current value with `select`, then runs `upsert`, in one transaction: returns the
/// value that was replaced.
fn replace_returning_previous(
    conn: &mut Connection,
    select: &str,
    key: impl Params,
    upsert: &str,
    row: impl Params,
) -> rusqlite::Result<Option<String>> {
    let tx = conn.transaction()?;
    let previous: Option<String> = tx.query_row(select, key, |r| r.get(0)).optional()?;
    tx.execute(upsert, row)?;
    tx.commit()?;
    Ok(previous)
}

/// Runs a `DELETE ... RETURNING value`: the deleted value, if there was one.
fn delete_returning(conn: &Connection, sql: &str, key: impl Params) -> rusqlite::Result<Option<String>> {
    conn.query_row(sql, key, |r| r.get(0)).optional()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_database_is_refused() {
        let dir = std::env::temp_dir().join(format!("toolgate-store-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("newer.sqlite3");
        let _ = std::fs::remove_file(&path);
        drop(SqliteStore::open(&path).unwrap());
        Connection::open(&path).unwrap().pragma_update(None, "user_version", 99).unwrap();
        let refused = SqliteStore::open(&path).unwrap_err().to_string();
        assert!(refused.contains("newer than this binary"), "{refused}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

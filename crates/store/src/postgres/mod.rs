//! The PostgreSQL store: several toolgate replicas on one database. A pool of connections
//! (deadpool) over the async driver (tokio-postgres); the schema in `migrations/postgres/`,
//! applied at connect under an advisory lock so that replicas starting together migrate once.
//!
//! What must happen once happens in one statement or under a row or advisory lock, never in
//! process memory: a ticket's consumption, a token's rotation, the per-submitter cap, the
//! first result of an agent for an execution.

mod approvals;
mod audit;
mod by_definition;
mod certs;
mod compliance;
mod confinement;
mod credentials;
mod engines;
mod executions;
mod experience;
mod experience_parts;
mod experience_recent;
mod federated;
mod fleet;
mod fleet_work;
mod groups;
mod json_rows;
mod listen;
mod plugin_config;
mod plugin_secrets;
mod replica_state;
mod responses;
mod reviews;
mod rollouts;
mod rotations;
mod sign_in;
mod tags;
mod uploads;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use toolgate_domain::StoreError;

use crate::changes::{Change, ChangeFeed};
use crate::{HealthStore, Repositories, STORE_SECONDS, StoreGauges};

/// The schema, one file per version, in order; `toolgate_schema.version` says how many ran.
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_schema", include_str!("../../migrations/postgres/0001_schema.sql")),
    ("0002_agent_presence", include_str!("../../migrations/postgres/0002_agent_presence.sql")),
    ("0003_replica_state", include_str!("../../migrations/postgres/0003_replica_state.sql")),
    ("0004_execution_keys", include_str!("../../migrations/postgres/0004_execution_keys.sql")),
    ("0005_audit_target_type", include_str!("../../migrations/postgres/0005_audit_target_type.sql")),
    ("0006_response_arrival", include_str!("../../migrations/postgres/0006_response_arrival.sql")),
    ("0007_approval_surface", include_str!("../../migrations/postgres/0007_approval_surface.sql")),
    ("0008_management_groups", include_str!("../../migrations/postgres/0008_management_groups.sql")),
    ("0009_audit_agents", include_str!("../../migrations/postgres/0009_audit_agents.sql")),
    ("0010_engine_principals", include_str!("../../migrations/postgres/0010_engine_principals.sql")),
    ("0011_access_reviews", include_str!("../../migrations/postgres/0011_access_reviews.sql")),
    ("0012_federated_identities", include_str!("../../migrations/postgres/0012_federated_identities.sql")),
    ("0013_idp_grants", include_str!("../../migrations/postgres/0013_idp_grants.sql")),
    ("0014_plugin_secrets", include_str!("../../migrations/postgres/0014_plugin_secrets.sql")),
    ("0015_uploads", include_str!("../../migrations/postgres/0015_uploads.sql")),
    ("0016_issued_certs", include_str!("../../migrations/postgres/0016_issued_certs.sql")),
    ("0017_cert_revocation", include_str!("../../migrations/postgres/0017_cert_revocation.sql")),
    ("0018_federated_tombstones", include_str!("../../migrations/postgres/0018_federated_tombstones.sql")),
    ("0019_quarantine_enforcement", include_str!("../../migrations/postgres/0019_quarantine_enforcement.sql")),
    ("0020_approval_plans", include_str!("../../migrations/postgres/0020_approval_plans.sql")),
    ("0021_rollouts", include_str!("../../migrations/postgres/0021_rollouts.sql")),
    ("0022_token_toolsets", include_str!("../../migrations/postgres/0022_token_toolsets.sql")),
    ("0023_experience", include_str!("../../migrations/postgres/0023_experience.sql")),
    ("0024_experience_rollups", include_str!("../../migrations/postgres/0024_experience_rollups.sql")),
    ("0025_experience_signals", include_str!("../../migrations/postgres/0025_experience_signals.sql")),
    ("0026_experience_apps", include_str!("../../migrations/postgres/0026_experience_apps.sql")),
    ("0027_experience_interfaces", include_str!("../../migrations/postgres/0027_experience_interfaces.sql")),
    ("0028_experience_app_packages", include_str!("../../migrations/postgres/0028_experience_app_packages.sql")),
    ("0029_experience_revision", include_str!("../../migrations/postgres/0029_experience_revision.sql")),
];

/// The advisory lock replicas take to migrate one at a time (any constant; "tg" in ASCII).
const MIGRATION_LOCK: i64 = 0x7467;

/// Connections per replica: enough for the audit writer, the agents' sweeps and requests.
const POOL_SIZE: usize = 16;

/// What went wrong inside a PostgreSQL operation; becomes a [`StoreError`] at the trait.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PgError {
    #[error(transparent)]
    Driver(#[from] tokio_postgres::Error),
    #[error("no database connection: {0}")]
    Pool(#[from] deadpool_postgres::PoolError),
    #[error("a stored value is not what this store writes: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{0}")]
    Invalid(String),
}

impl From<PgError> for StoreError {
    fn from(e: PgError) -> Self {
        match e {
            PgError::Pool(e) => StoreError::Unavailable(format!("no database connection: {e}")),
            other => StoreError::backend(other),
        }
    }
}

pub(crate) type Pg<T> = std::result::Result<T, PgError>;

/// Runs an operation and turns its error into the store's.
pub(crate) async fn pg<T>(work: impl Future<Output = Pg<T>>) -> Result<T, StoreError> {
    work.await.map_err(StoreError::from)
}

/// A handle to the database shared by every replica.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    /// Names this server in the rows it writes (the audit log's `replica`) and in the
    /// changes it announces.
    replica: Arc<str>,
    /// What other replicas change, heard through LISTEN.
    feed: Arc<ChangeFeed>,
    /// The NOTIFY channel of this deployment (its schema's; see [`listen::channel_for`]).
    channel: Arc<str>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").field("replica", &self.replica).finish_non_exhaustive()
    }
}

/// A pooled connection; the time it is held is the store operation's latency.
pub(crate) struct Conn {
    client: deadpool_postgres::Object,
    started: Instant,
}

impl std::ops::Deref for Conn {
    type Target = deadpool_postgres::Object;
    fn deref(&self) -> &Self::Target {
        &self.client
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.client
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        metrics::histogram!(STORE_SECONDS).record(self.started.elapsed().as_secs_f64());
    }
}

/// Where a URL points, without its password: what error messages may show.
fn describe(config: &tokio_postgres::Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}/{}", config.get_dbname().unwrap_or("(default database)"))
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user:password@host:port/database`) and brings the
    /// schema up to date. `replica` names this server in the audit log.
    pub async fn connect(url: &str, replica: &str) -> Result<Self, StoreError> {
        let config: tokio_postgres::Config = url.parse().map_err(|e| {
            StoreError::Unavailable(format!(
                "the database URL is not a PostgreSQL URL ({e}): write postgres://user:password@host:port/database"
            ))
        })?;
        Self::connect_with(config, replica).await
    }

    /// Like [`PostgresStore::connect`], from a parsed configuration (tests set a schema).
    pub async fn connect_with(config: tokio_postgres::Config, replica: &str) -> Result<Self, StoreError> {
        let target = describe(&config);
        let listener_config = config.clone();
        let manager = Manager::from_config(
            config,
            tokio_postgres::NoTls,
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(10)))
            .create_timeout(Some(Duration::from_secs(10)))
            .build()
            .map_err(|e| StoreError::Unavailable(format!("cannot set up the connection pool for {target}: {e}")))?;
        let mut store = Self { pool, replica: replica.into(), feed: Arc::default(), channel: "toolgate".into() };
        let prepared = async {
            store.migrate().await?;
            let schema: String = store.conn().await?.query_one("SELECT current_schema()", &[]).await?.get(0);
            Ok::<_, PgError>(schema)
        };
        let schema = prepared.await.map_err(|e| match e {
            PgError::Pool(e) => StoreError::Unavailable(format!("cannot connect to PostgreSQL at {target}: {e}")),
            PgError::Invalid(text) => StoreError::Unavailable(text),
            other => StoreError::Unavailable(format!("cannot prepare the database at {target}: {other}")),
        })?;
        store.channel = listen::channel_for(&schema);
        listen::spawn(listener_config, store.channel.clone(), store.replica.clone(), Arc::downgrade(&store.feed));
        Ok(store)
    }

    async fn migrate(&self) -> Pg<()> {
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
        tx.batch_execute("CREATE TABLE IF NOT EXISTS toolgate_schema (version INTEGER NOT NULL)").await?;
        let version: Option<i32> = tx.query_opt("SELECT version FROM toolgate_schema", &[]).await?.map(|r| r.get(0));
        let version = version.unwrap_or(0) as usize;
        if version > MIGRATIONS.len() {
            return Err(PgError::Invalid(format!(
                "the database is at schema version {version}, newer than this binary's {}: upgrade toolgate",
                MIGRATIONS.len()
            )));
        }
        for (_, sql) in &MIGRATIONS[version..] {
            tx.batch_execute(sql).await?;
        }
        let now = MIGRATIONS.len() as i32;
        tx.execute("DELETE FROM toolgate_schema", &[]).await?;
        tx.execute("INSERT INTO toolgate_schema (version) VALUES ($1)", &[&now]).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Every repository, backed by this database.
    pub fn repositories(&self) -> Repositories {
        let shared = crate::replica_state::Shared {
            changes: self.feed.clone(),
            state: Arc::new(self.clone()),
            replica: self.replica.clone(),
        };
        Repositories::of(self.clone(), Some(shared))
    }

    pub(crate) async fn conn(&self) -> Pg<Conn> {
        let started = Instant::now();
        Ok(Conn { client: self.pool.get().await?, started })
    }

    pub(crate) fn replica(&self) -> &str {
        &self.replica
    }

    /// Runs an UPDATE of one row and, when it changed it, announces `change`: whether it did.
    pub(crate) async fn update_announcing(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
        change: Change,
    ) -> Pg<bool> {
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        let changed = execute(&tx, sql, params).await? == 1;
        if changed {
            self.notify(&tx, change).await?;
        }
        tx.commit().await?;
        Ok(changed)
    }

    /// Announces `change` to the other replicas when `c`'s transaction commits.
    pub(crate) async fn notify(&self, c: &impl GenericClient, change: Change) -> Pg<()> {
        listen::notify(c, &self.channel, &self.replica, &change).await
    }
}

/// Starts a transaction whose commit does not wait for the disk (`synchronous_commit = off`):
/// it survives this process, not necessarily a crash of the database's machine. For rows that
/// are sent again if lost (agents' reports) or that nobody waits on (the audit rows of reads);
/// every other write commits durably.
pub(crate) async fn relaxed(c: &mut Conn) -> Pg<deadpool_postgres::Transaction<'_>> {
    let tx = c.transaction().await?;
    tx.batch_execute("SET LOCAL synchronous_commit = off").await?;
    Ok(tx)
}

/// Runs one prepared (and cached) statement.
pub(crate) async fn rows(
    c: &impl GenericClient,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Pg<Vec<tokio_postgres::Row>> {
    let statement = c.prepare_cached(sql).await?;
    Ok(c.query(&statement, params).await?)
}

/// The one number a `SELECT COUNT(*) …` (or a sum cast to bigint) answers, as a count.
pub(crate) async fn count(
    c: &impl GenericClient,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Pg<usize> {
    let counted: i64 = rows(c, sql, params).await?.first().map(|r| r.try_get(0)).transpose()?.unwrap_or(0);
    Ok(counted.max(0) as usize)
}

pub(crate) async fn row(
    c: &impl GenericClient,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Pg<Option<tokio_postgres::Row>> {
    let statement = c.prepare_cached(sql).await?;
    Ok(c.query_opt(&statement, params).await?)
}

pub(crate) async fn execute(
    c: &impl GenericClient,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Pg<u64> {
    let statement = c.prepare_cached(sql).await?;
    Ok(c.execute(&statement, params).await?)
}

#[async_trait]
impl HealthStore for PostgresStore {
    async fn check_ready(&self, now_ms: i64) -> Result<(), StoreError> {
        pg(async {
            let c = self.conn().await?;
            execute(
                &*c,
                "INSERT INTO readiness (id, checked_at_ms) VALUES (1, $1)
                 ON CONFLICT (id) DO UPDATE SET checked_at_ms = excluded.checked_at_ms",
                &[&now_ms],
            )
            .await
            .map(drop)
        })
        .await
    }

    async fn gauges(&self, now_secs: i64) -> Result<StoreGauges, StoreError> {
        pg(async {
            let c = self.conn().await?;
            let approvals_pending: i64 = c
                .query_one("SELECT count(*) FROM approval WHERE status = 'pending' AND expires_at > $1", &[&now_secs])
                .await?
                .try_get(0)?;
            let executions_in_flight: i64 = c
                .query_one(
                    "SELECT count(DISTINCT execution_id) FROM execution_target WHERE status IN ('pending', 'running')",
                    &[],
                )
                .await?
                .try_get(0)?;
            Ok(StoreGauges {
                approvals_pending: approvals_pending as u64,
                executions_in_flight: executions_in_flight as u64,
            })
        })
        .await
    }
}

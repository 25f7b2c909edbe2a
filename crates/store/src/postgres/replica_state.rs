//! [`ReplicaStore`] on PostgreSQL.

use async_trait::async_trait;
use toolgate_domain::StoreError;

use super::{PostgresStore, execute, pg, row};
use crate::changes::Change;
use crate::replica_state::{ReplicaStore, SessionRecord};

type Result<T> = std::result::Result<T, StoreError>;

#[async_trait]
impl ReplicaStore for PostgresStore {
    async fn shared_secret(&self, name: &str, fresh: &[u8]) -> Result<Vec<u8>> {
        pg(async {
            let c = self.conn().await?;
            // The first replica's insert wins; every one reads the winner.
            execute(
                &*c,
                "INSERT INTO shared_secret (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
                &[&name, &fresh],
            )
            .await?;
            let found = row(&*c, "SELECT value FROM shared_secret WHERE name = $1", &[&name]).await?;
            found
                .map(|r| r.try_get(0))
                .transpose()?
                .ok_or_else(|| super::PgError::Invalid(format!("the shared secret {name} is gone")))
        })
        .await
    }

    async fn use_once(&self, key: &str, expires_at_secs: i64, now_secs: i64) -> Result<bool> {
        pg(async {
            let c = self.conn().await?;
            execute(&*c, "DELETE FROM single_use WHERE expires_at <= $1", &[&now_secs]).await?;
            let taken = execute(
                &*c,
                "INSERT INTO single_use (key, expires_at) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
                &[&key, &expires_at_secs],
            )
            .await?;
            Ok(taken == 1)
        })
        .await
    }

    async fn put_session(&self, s: &SessionRecord, idle_before_ms: i64) -> Result<()> {
        pg(async {
            let c = self.conn().await?;
            execute(&*c, "DELETE FROM mcp_session WHERE last_seen_ms < $1", &[&idle_before_ms]).await?;
            execute(
                &*c,
                "INSERT INTO mcp_session (id, principal, version, client_capabilities, last_seen_ms, replica) VALUES ($1, $2, $3, $4, $5, $6)",
                &[&s.id, &s.principal, &s.version, &s.client_capabilities, &s.last_seen_ms, &s.replica],
            )
            .await
            .map(drop)
        })
        .await
    }

    async fn session(&self, id: &str) -> Result<Option<SessionRecord>> {
        pg(async {
            let c = self.conn().await?;
            let found = row(
                &*c,
                "SELECT id, principal, version, client_capabilities, last_seen_ms, replica FROM mcp_session WHERE id = $1",
                &[&id],
            )
            .await?;
            let Some(r) = found else { return Ok(None) };
            Ok(Some(SessionRecord {
                id: r.try_get(0)?,
                principal: r.try_get(1)?,
                version: r.try_get(2)?,
                client_capabilities: r.try_get(3)?,
                last_seen_ms: r.try_get(4)?,
                replica: r.try_get(5)?,
            }))
        })
        .await
    }

    async fn touch_session(&self, id: &str, last_seen_ms: i64) -> Result<()> {
        pg(async {
            let c = self.conn().await?;
            execute(
                &*c,
                "UPDATE mcp_session SET last_seen_ms = greatest(last_seen_ms, $2) WHERE id = $1",
                &[&id, &last_seen_ms],
            )
            .await
            .map(drop)
        })
        .await
    }

    async fn announce(&self, change: Change) -> Result<()> {
        pg(async { self.notify(&*self.conn().await?, change).await }).await
    }

    async fn remove_session(&self, id: &str) -> Result<bool> {
        pg(async { Ok(execute(&*self.conn().await?, "DELETE FROM mcp_session WHERE id = $1", &[&id]).await? == 1) })
            .await
    }
}

//! Agent tags on PostgreSQL, and the two conditional writes tags and plugin configuration
//! share (replace, returning what was there; delete, returning it).

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use toolgate_domain::StoreError;
use toolgate_domain::records::{Change, Tag};

use super::groups::refresh_agent_rules;
use super::{Pg, PostgresStore, execute, pg, row, rows};
use crate::TagStore;

type Result<T> = std::result::Result<T, StoreError>;

/// Reads the current value with `select`, then runs `upsert`, in one transaction with the
/// row locked: returns the value that was replaced.
pub(super) async fn replace_returning_previous(
    store: &PostgresStore,
    select: &str,
    key: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    upsert: &str,
    values: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Pg<Option<String>> {
    let mut c = store.conn().await?;
    let tx = c.transaction().await?;
    let previous = row(&tx, &format!("{select} FOR UPDATE"), key).await?.map(|r| r.try_get(0)).transpose()?;
    execute(&tx, upsert, values).await?;
    tx.commit().await?;
    Ok(previous)
}

/// Runs a `DELETE ... RETURNING value`: the deleted value, if there was one.
pub(super) async fn delete_returning(
    c: &impl GenericClient,
    sql: &str,
    key: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Pg<Option<String>> {
    row(c, sql, key).await?.map(|r| r.try_get(0)).transpose().map_err(Into::into)
}

#[async_trait]
impl TagStore for PostgresStore {
    async fn agent_tags(&self, agent_id: &str) -> Result<Vec<Tag>> {
        pg(async {
            let c = self.conn().await?;
            rows(
                &*c,
                "SELECT key, value, updated_at, updated_by FROM agent_tag WHERE agent_id = $1 ORDER BY key",
                &[&agent_id],
            )
            .await?
            .iter()
            .map(|r| {
                Ok(Tag {
                    key: r.try_get(0)?,
                    value: r.try_get(1)?,
                    updated_at: r.try_get(2)?,
                    updated_by: r.try_get(3)?,
                })
            })
            .collect()
        })
        .await
    }

    async fn set_agent_tag(
        &self,
        agent_id: &str,
        key: &str,
        value: &str,
        change: Change<'_>,
    ) -> Result<Option<String>> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            let previous =
                row(&tx, "SELECT value FROM agent_tag WHERE agent_id = $1 AND key = $2 FOR UPDATE", &[&agent_id, &key])
                    .await?
                    .map(|r| r.try_get(0))
                    .transpose()?;
            execute(
                &tx,
                "INSERT INTO agent_tag (agent_id, key, value, updated_at, updated_by) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (agent_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at,
                 updated_by = excluded.updated_by",
                &[&agent_id, &key, &value, &change.at, &change.by],
            )
            .await?;
            // Rules read tags: membership follows them in the same commit.
            refresh_agent_rules(&tx, agent_id).await?;
            tx.commit().await?;
            Ok(previous)
        })
        .await
    }

    async fn delete_agent_tag(&self, agent_id: &str, key: &str) -> Result<Option<String>> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            let deleted = delete_returning(
                &tx,
                "DELETE FROM agent_tag WHERE agent_id = $1 AND key = $2 RETURNING value",
                &[&agent_id, &key],
            )
            .await?;
            refresh_agent_rules(&tx, agent_id).await?;
            tx.commit().await?;
            Ok(deleted)
        })
        .await
    }
}

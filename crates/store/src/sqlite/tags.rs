//! Agent tags in SQLite.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use toolgate_domain::StoreError;
use toolgate_domain::records::{Change, Tag};

use super::groups::refresh_agent_rules;
use super::{SqliteStore, delete_returning};
use crate::TagStore;

type Result<T> = std::result::Result<T, StoreError>;

#[async_trait]
impl TagStore for SqliteStore {
    async fn agent_tags(&self, agent_id: &str) -> Result<Vec<Tag>> {
        let agent_id = agent_id.to_string();
        self.run(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT key, value, updated_at, updated_by FROM agent_tag WHERE agent_id = ?1 ORDER BY key",
            )?;
            let rows = stmt.query_map(params![agent_id], |r| {
                Ok(Tag { key: r.get(0)?, value: r.get(1)?, updated_at: r.get(2)?, updated_by: r.get(3)? })
            })?;
            rows.collect()
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
        let (agent_id, key, value, by, now) =
            (agent_id.to_string(), key.to_string(), value.to_string(), change.by.to_string(), change.at);
        self.run(move |c| {
            let tx = c.transaction()?;
            let previous = tx
                .query_row(
                    "SELECT value FROM agent_tag WHERE agent_id = ?1 AND key = ?2",
                    params![agent_id, key],
                    |r| r.get(0),
                )
                .optional()?;
            tx.execute(
                "INSERT INTO agent_tag (agent_id, key, value, updated_at, updated_by) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (agent_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at,
                 updated_by = excluded.updated_by",
                params![agent_id, key, value, now, by],
            )?;
            // Rules read tags: membership follows them in the same commit.
            refresh_agent_rules(&tx, &agent_id)?;
            tx.commit()?;
            Ok(previous)
        })
        .await
    }

    async fn delete_agent_tag(&self, agent_id: &str, key: &str) -> Result<Option<String>> {
        let (agent_id, key) = (agent_id.to_string(), key.to_string());
        self.run(move |c| {
            let tx = c.transaction()?;
            let deleted = delete_returning(
                &tx,
                "DELETE FROM agent_tag WHERE agent_id = ?1 AND key = ?2 RETURNING value",
                params![agent_id, key],
            )?;
            refresh_agent_rules(&tx, &agent_id)?;
            tx.commit()?;
            Ok(deleted)
        })
        .await
    }
}

//! Tags on agents: one value per (agent, key).

use rusqlite::params;
use serde::Serialize;

use super::{Store, StoreError};

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Tag {
    pub key: String,
    pub value: String,
    pub updated_at: i64,
    pub updated_by: String,
}

impl Store {
    pub fn agent_tags(&self, agent_id: &str) -> Result<Vec<Tag>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare_cached(
            "SELECT key, value, updated_at, updated_by FROM agent_tag WHERE agent_id = ?1 ORDER BY key",
        )?;
        let rows = stmt.query_map(params![agent_id], |r| {
            Ok(Tag { key: r.get(0)?, value: r.get(1)?, updated_at: r.get(2)?, updated_by: r.get(3)? })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Sets a tag; returns the value it replaced.
    pub fn set_agent_tag(
        &self,
        agent_id: &str,
        key: &str,
        value: &str,
        now: i64,
        by: &str,
    ) -> Result<Option<String>, StoreError> {
        self.replace_returning_previous(
            "SELECT value FROM agent_tag WHERE agent_id = ?1 AND key = ?2",
            params![agent_id, key],
            "INSERT INTO agent_tag (agent_id, key, value, updated_at, updated_by) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (agent_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at,
             updated_by = excluded.updated_by",
            params![agent_id, key, value, now, by],
        )
    }

    /// Deletes a tag; returns its value if it existed.
    pub fn delete_agent_tag(&self, agent_id: &str, key: &str) -> Result<Option<String>, StoreError> {
        self.delete_returning(
            "DELETE FROM agent_tag WHERE agent_id = ?1 AND key = ?2 RETURNING value",
            params![agent_id, key],
        )
    }
}

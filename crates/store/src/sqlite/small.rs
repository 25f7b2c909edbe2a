//! The smaller areas in SQLite: the audit log, agent tags, plugin configuration and kill
//! switches, management groups.

use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use toolgate_domain::StoreError;
use toolgate_domain::audit::{AuditEvent, AuditFilter};
use toolgate_domain::records::{Change, ConfigEntry, KillSwitch, ManagementGroup, Tag};

use super::{SqliteStore, delete_returning, replace_returning_previous, without_fsync};
use crate::{AuditStore, GroupStore, PluginConfigStore, TagStore, rules};

type Result<T> = std::result::Result<T, StoreError>;

fn append_rows(c: &mut rusqlite::Connection, events: &[AuditEvent]) -> rusqlite::Result<()> {
    let tx = c.transaction()?;
    {
        let mut stmt = tx.prepare_cached(
            "INSERT INTO audit (at_ms, principal, token_id, action, target, result, detail, correlation_id, target_type) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?;
        for e in events {
            stmt.execute(params![
                e.at_ms,
                e.principal,
                e.token_id,
                e.action,
                e.target,
                e.result,
                e.detail,
                e.correlation_id,
                e.target_type
            ])?;
        }
    }
    tx.commit()
}

#[async_trait]
impl AuditStore for SqliteStore {
    async fn append(&self, events: Arc<[AuditEvent]>, durable: bool) -> Result<()> {
        // A batch nobody waits on skips the fsync; a state-changing call's row does not.
        self.run(move |c| if durable { append_rows(c, &events) } else { without_fsync(c, |c| append_rows(c, &events)) })
            .await
    }

    async fn query(&self, f: &AuditFilter) -> Result<Vec<AuditEvent>> {
        let f = f.clone();
        self.run(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT at_ms, principal, token_id, action, target, result, detail, correlation_id, target_type FROM audit
                 WHERE (?1 IS NULL OR at_ms >= ?1) AND (?2 IS NULL OR at_ms <= ?2) AND (?3 IS NULL OR principal = ?3)
                   AND (?4 IS NULL OR substr(action, 1, length(?4)) = ?4) AND (?5 IS NULL OR result = ?5)
                   AND (?6 IS NULL OR correlation_id = ?6) AND (?8 IS NULL OR target_type = ?8)
                 ORDER BY id DESC LIMIT ?7",
            )?;
            let rows = stmt.query_map(
                params![f.since_ms, f.until_ms, f.principal, f.action_prefix, f.result, f.correlation_id, f.limit, f.target_type],
                |r| {
                    Ok(AuditEvent {
                        at_ms: r.get(0)?,
                        principal: r.get(1)?,
                        token_id: r.get(2)?,
                        action: r.get(3)?,
                        target: r.get(4)?,
                        target_type: r.get(8)?,
                        result: r.get(5)?,
                        detail: r.get(6)?,
                        correlation_id: r.get(7)?,
                        replica: None,
                    })
                },
            )?;
            rows.collect()
        })
        .await
    }

    async fn prune(&self, before_ms: i64) -> Result<u64> {
        self.run(move |c| c.execute("DELETE FROM audit WHERE at_ms < ?1", params![before_ms]).map(|n| n as u64)).await
    }
}

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
            replace_returning_previous(
                c,
                "SELECT value FROM agent_tag WHERE agent_id = ?1 AND key = ?2",
                params![agent_id, key],
                "INSERT INTO agent_tag (agent_id, key, value, updated_at, updated_by) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (agent_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at,
                 updated_by = excluded.updated_by",
                params![agent_id, key, value, now, by],
            )
        })
        .await
    }

    async fn delete_agent_tag(&self, agent_id: &str, key: &str) -> Result<Option<String>> {
        let (agent_id, key) = (agent_id.to_string(), key.to_string());
        self.run(move |c| {
            delete_returning(
                c,
                "DELETE FROM agent_tag WHERE agent_id = ?1 AND key = ?2 RETURNING value",
                params![agent_id, key],
            )
        })
        .await
    }
}

fn config_entry(row: &rusqlite::Row) -> rusqlite::Result<ConfigEntry> {
    Ok(ConfigEntry {
        plugin: row.get(0)?,
        key: row.get(1)?,
        value: row.get(2)?,
        updated_at: row.get(3)?,
        updated_by: row.get(4)?,
    })
}

fn kill_switch(conn: &rusqlite::Connection, plugin: &str, action: Option<&str>) -> rusqlite::Result<KillSwitch> {
    let stored = conn
        .query_row(
            "SELECT engaged, reason, updated_at, updated_by FROM plugin_kill_switch WHERE plugin = ?1 AND action = ?2",
            params![plugin, action.unwrap_or("")],
            |r| Ok((r.get::<_, bool>(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()?;
    Ok(rules::kill_switch(plugin, action, stored))
}

#[async_trait]
impl PluginConfigStore for SqliteStore {
    async fn list(&self, plugin: Option<&str>) -> Result<Vec<ConfigEntry>> {
        let plugin = plugin.map(str::to_string);
        self.run(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT plugin, key, value, updated_at, updated_by FROM plugin_config
                 WHERE ?1 IS NULL OR plugin = ?1 ORDER BY plugin, key",
            )?;
            stmt.query_map(params![plugin], config_entry)?.collect()
        })
        .await
    }

    async fn get(&self, plugin: &str, key: &str) -> Result<Option<ConfigEntry>> {
        let (plugin, key) = (plugin.to_string(), key.to_string());
        self.run(move |c| {
            c.query_row(
                "SELECT plugin, key, value, updated_at, updated_by FROM plugin_config WHERE plugin = ?1 AND key = ?2",
                params![plugin, key],
                config_entry,
            )
            .optional()
        })
        .await
    }

    async fn set(&self, plugin: &str, key: &str, value: &str, change: Change<'_>) -> Result<Option<String>> {
        let (plugin, key, value, by, now) =
            (plugin.to_string(), key.to_string(), value.to_string(), change.by.to_string(), change.at);
        self.run(move |c| {
            replace_returning_previous(
                c,
                "SELECT value FROM plugin_config WHERE plugin = ?1 AND key = ?2",
                params![plugin, key],
                "INSERT INTO plugin_config (plugin, key, value, updated_at, updated_by) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (plugin, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at, updated_by = excluded.updated_by",
                params![plugin, key, value, now, by],
            )
        })
        .await
    }

    async fn delete(&self, plugin: &str, key: &str) -> Result<Option<String>> {
        let (plugin, key) = (plugin.to_string(), key.to_string());
        self.run(move |c| {
            delete_returning(
                c,
                "DELETE FROM plugin_config WHERE plugin = ?1 AND key = ?2 RETURNING value",
                params![plugin, key],
            )
        })
        .await
    }

    async fn kill_switch(&self, plugin: &str, action: Option<&str>) -> Result<KillSwitch> {
        let (plugin, action) = (plugin.to_string(), action.map(str::to_string));
        self.run(move |c| kill_switch(c, &plugin, action.as_deref())).await
    }

    async fn set_kill_switch(
        &self,
        plugin: &str,
        action: Option<&str>,
        enabled: bool,
        reason: Option<&str>,
        change: Change<'_>,
    ) -> Result<KillSwitch> {
        let (plugin, action, reason) = (plugin.to_string(), action.map(str::to_string), reason.map(str::to_string));
        let (by, now) = (change.by.to_string(), change.at);
        self.run(move |c| {
            c.execute(
                "INSERT INTO plugin_kill_switch (plugin, action, engaged, reason, updated_at, updated_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (plugin, action) DO UPDATE SET engaged = excluded.engaged, reason = excluded.reason,
                 updated_at = excluded.updated_at, updated_by = excluded.updated_by",
                params![plugin, action.as_deref().unwrap_or(""), enabled, reason, now, by],
            )?;
            kill_switch(c, &plugin, action.as_deref())
        })
        .await
    }
}

#[async_trait]
impl GroupStore for SqliteStore {
    async fn management_groups(&self) -> Result<Vec<ManagementGroup>> {
        self.run(|c| {
            let mut stmt = c.prepare_cached("SELECT id, name, description FROM management_group ORDER BY name, id")?;
            let rows =
                stmt.query_map([], |r| Ok(ManagementGroup { id: r.get(0)?, name: r.get(1)?, description: r.get(2)? }))?;
            rows.collect()
        })
        .await
    }
}

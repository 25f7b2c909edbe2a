//! Plugin configuration and kill switches in SQLite.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use toolgate_domain::StoreError;
use toolgate_domain::records::{Change, ConfigEntry, KillSwitch};

use super::{SqliteStore, delete_returning, replace_returning_previous};
use crate::{PluginConfigStore, rules};

type Result<T> = std::result::Result<T, StoreError>;

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

    async fn engaged_kill_switches(&self) -> Result<Vec<KillSwitch>> {
        self.run(|c| {
            let mut stmt = c.prepare_cached(rules::ENGAGED_KILL_SWITCHES)?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))?;
            rows.map(|r| r.map(rules::engaged_kill_switch)).collect()
        })
        .await
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

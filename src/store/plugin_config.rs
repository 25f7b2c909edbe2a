//! Plugin configuration values and kill switches.

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::{Store, StoreError};

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConfigEntry {
    pub plugin: String,
    pub key: String,
    pub value: String,
    pub updated_at: i64,
    pub updated_by: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KillSwitch {
    pub plugin: String,
    /// `None`: the switch for the whole plugin.
    pub action: Option<String>,
    pub enabled: bool,
    pub reason: Option<String>,
    pub updated_at: Option<i64>,
    pub updated_by: Option<String>,
}

fn entry(row: &rusqlite::Row) -> rusqlite::Result<ConfigEntry> {
    Ok(ConfigEntry {
        plugin: row.get(0)?,
        key: row.get(1)?,
        value: row.get(2)?,
        updated_at: row.get(3)?,
        updated_by: row.get(4)?,
    })
}

impl Store {
    /// Every value, or one plugin's, ordered by plugin then key.
    pub fn list_plugin_config(&self, plugin: Option<&str>) -> Result<Vec<ConfigEntry>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare_cached(
            "SELECT plugin, key, value, updated_at, updated_by FROM plugin_config
             WHERE ?1 IS NULL OR plugin = ?1 ORDER BY plugin, key",
        )?;
        let rows = stmt.query_map(params![plugin], entry)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn get_plugin_config(&self, plugin: &str, key: &str) -> Result<Option<ConfigEntry>, StoreError> {
        let conn = self.conn()?;
        Ok(conn
            .query_row(
                "SELECT plugin, key, value, updated_at, updated_by FROM plugin_config WHERE plugin = ?1 AND key = ?2",
                params![plugin, key],
                entry,
            )
            .optional()?)
    }

    /// Sets a value; returns the one it replaced.
    pub fn set_plugin_config(
        &self,
        plugin: &str,
        key: &str,
        value: &str,
        now: i64,
        by: &str,
    ) -> Result<Option<String>, StoreError> {
        self.replace_returning_previous(
            "SELECT value FROM plugin_config WHERE plugin = ?1 AND key = ?2",
            params![plugin, key],
            "INSERT INTO plugin_config (plugin, key, value, updated_at, updated_by) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (plugin, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at, updated_by = excluded.updated_by",
            params![plugin, key, value, now, by],
        )
    }

    /// Deletes a value; returns it if it existed.
    pub fn delete_plugin_config(&self, plugin: &str, key: &str) -> Result<Option<String>, StoreError> {
        self.delete_returning(
            "DELETE FROM plugin_config WHERE plugin = ?1 AND key = ?2 RETURNING value",
            params![plugin, key],
        )
    }

    pub fn get_kill_switch(&self, plugin: &str, action: Option<&str>) -> Result<KillSwitch, StoreError> {
        let conn = self.conn()?;
        let row = conn
            .query_row(
                "SELECT engaged, reason, updated_at, updated_by FROM plugin_kill_switch WHERE plugin = ?1 AND action = ?2",
                params![plugin, action.unwrap_or("")],
                |r| Ok((r.get::<_, bool>(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()?;
        let (enabled, reason, updated_at, updated_by) = match row {
            Some((e, r, at, by)) => (e, r, Some(at), Some(by)),
            None => (false, None, None, None),
        };
        Ok(KillSwitch {
            plugin: plugin.to_string(),
            action: action.map(str::to_string),
            enabled,
            reason,
            updated_at,
            updated_by,
        })
    }

    pub fn set_kill_switch(
        &self,
        plugin: &str,
        action: Option<&str>,
        enabled: bool,
        reason: Option<&str>,
        now: i64,
        by: &str,
    ) -> Result<KillSwitch, StoreError> {
        {
            let conn = self.conn()?;
            conn.execute(
                "INSERT INTO plugin_kill_switch (plugin, action, engaged, reason, updated_at, updated_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (plugin, action) DO UPDATE SET engaged = excluded.engaged, reason = excluded.reason,
                 updated_at = excluded.updated_at, updated_by = excluded.updated_by",
                params![plugin, action.unwrap_or(""), enabled, reason, now, by],
            )?;
        }
        self.get_kill_switch(plugin, action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_round_trip() {
        let store = Store::open_in_memory().unwrap();
        assert_eq!(store.set_plugin_config("p", "k", "v1", 1, "admin").unwrap(), None);
        assert_eq!(store.set_plugin_config("p", "k", "v2", 2, "admin").unwrap(), Some("v1".into()));
        assert_eq!(store.get_plugin_config("p", "k").unwrap().unwrap().value, "v2");
        assert_eq!(store.list_plugin_config(Some("p")).unwrap().len(), 1);
        assert_eq!(store.list_plugin_config(Some("q")).unwrap().len(), 0);
        assert_eq!(store.delete_plugin_config("p", "k").unwrap(), Some("v2".into()));
        assert_eq!(store.delete_plugin_config("p", "k").unwrap(), None);
    }

    #[test]
    fn kill_switch_defaults_off() {
        let store = Store::open_in_memory().unwrap();
        assert!(!store.get_kill_switch("p", None).unwrap().enabled);
        let s = store.set_kill_switch("p", Some("sync"), true, Some("incident"), 5, "admin").unwrap();
        assert!(s.enabled);
        assert!(!store.get_kill_switch("p", None).unwrap().enabled);
        assert!(store.get_kill_switch("p", Some("sync")).unwrap().enabled);
    }
}

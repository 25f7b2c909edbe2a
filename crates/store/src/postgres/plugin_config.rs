//! Plugin configuration and kill switches on PostgreSQL.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use toolgate_domain::StoreError;
use toolgate_domain::records::{Change, ConfigEntry, KillSwitch};

use super::tags::{delete_returning, replace_returning_previous};
use super::{Pg, PostgresStore, execute, pg, row, rows};
use crate::{PluginConfigStore, rules};

type Result<T> = std::result::Result<T, StoreError>;

fn config_entry(r: &tokio_postgres::Row) -> Pg<ConfigEntry> {
    Ok(ConfigEntry {
        plugin: r.try_get(0)?,
        key: r.try_get(1)?,
        value: r.try_get(2)?,
        updated_at: r.try_get(3)?,
        updated_by: r.try_get(4)?,
    })
}

async fn kill_switch(c: &impl GenericClient, plugin: &str, action: Option<&str>) -> Pg<KillSwitch> {
    let found = row(
        c,
        "SELECT engaged, reason, updated_at, updated_by FROM plugin_kill_switch WHERE plugin = $1 AND action = $2",
        &[&plugin, &action.unwrap_or("")],
    )
    .await?;
    let stored = match found {
        Some(r) => Some((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?)),
        None => None,
    };
    Ok(rules::kill_switch(plugin, action, stored))
}

#[async_trait]
impl PluginConfigStore for PostgresStore {
    async fn list(&self, plugin: Option<&str>) -> Result<Vec<ConfigEntry>> {
        pg(async {
            let c = self.conn().await?;
            rows(
                &*c,
                "SELECT plugin, key, value, updated_at, updated_by FROM plugin_config
                 WHERE $1::text IS NULL OR plugin = $1 ORDER BY plugin, key",
                &[&plugin],
            )
            .await?
            .iter()
            .map(config_entry)
            .collect()
        })
        .await
    }

    async fn get(&self, plugin: &str, key: &str) -> Result<Option<ConfigEntry>> {
        pg(async {
            let c = self.conn().await?;
            row(
                &*c,
                "SELECT plugin, key, value, updated_at, updated_by FROM plugin_config WHERE plugin = $1 AND key = $2",
                &[&plugin, &key],
            )
            .await?
            .as_ref()
            .map(config_entry)
            .transpose()
        })
        .await
    }

    async fn set(&self, plugin: &str, key: &str, value: &str, change: Change<'_>) -> Result<Option<String>> {
        pg(replace_returning_previous(
            self,
            "SELECT value FROM plugin_config WHERE plugin = $1 AND key = $2",
            &[&plugin, &key],
            "INSERT INTO plugin_config (plugin, key, value, updated_at, updated_by) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (plugin, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at, updated_by = excluded.updated_by",
            &[&plugin, &key, &value, &change.at, &change.by],
        ))
        .await
    }

    async fn delete(&self, plugin: &str, key: &str) -> Result<Option<String>> {
        pg(async {
            let c = self.conn().await?;
            delete_returning(
                &*c,
                "DELETE FROM plugin_config WHERE plugin = $1 AND key = $2 RETURNING value",
                &[&plugin, &key],
            )
            .await
        })
        .await
    }

    async fn kill_switch(&self, plugin: &str, action: Option<&str>) -> Result<KillSwitch> {
        pg(async { kill_switch(&*self.conn().await?, plugin, action).await }).await
    }

    async fn engaged_kill_switches(&self) -> Result<Vec<KillSwitch>> {
        pg(async {
            let found = rows(&*self.conn().await?, rules::ENGAGED_KILL_SWITCHES, &[]).await?;
            let stored =
                found.iter().map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?, r.try_get(4)?)));
            let stored = stored.collect::<std::result::Result<Vec<_>, tokio_postgres::Error>>()?;
            Ok(stored.into_iter().map(rules::engaged_kill_switch).collect())
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
        pg(async {
            let c = self.conn().await?;
            execute(
                &*c,
                "INSERT INTO plugin_kill_switch (plugin, action, engaged, reason, updated_at, updated_by) VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (plugin, action) DO UPDATE SET engaged = excluded.engaged, reason = excluded.reason,
                 updated_at = excluded.updated_at, updated_by = excluded.updated_by",
                &[&plugin, &action.unwrap_or(""), &enabled, &reason, &change.at, &change.by],
            )
            .await?;
            // Every replica refuses what it stops, and tells its agents.
            self.notify(&*c, crate::Change::KillSwitches).await?;
            kill_switch(&*c, plugin, action).await
        })
        .await
    }
}

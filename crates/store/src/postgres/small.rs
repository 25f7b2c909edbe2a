//! The smaller areas on PostgreSQL: the audit log (every replica's, each row naming its
//! writer), agent tags, plugin configuration and kill switches, management groups.

use std::sync::Arc;

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use toolgate_domain::StoreError;
use toolgate_domain::audit::{AuditEvent, AuditFilter};
use toolgate_domain::records::{Change, ConfigEntry, KillSwitch, ManagementGroup, Tag};

use super::{Pg, PostgresStore, execute, pg, relaxed, row, rows};
use crate::{AuditStore, GroupStore, PluginConfigStore, TagStore, rules};

type Result<T> = std::result::Result<T, StoreError>;

#[async_trait]
impl AuditStore for PostgresStore {
    async fn append(&self, events: Arc<[AuditEvent]>, durable: bool) -> Result<()> {
        let column = |f: fn(&AuditEvent) -> Option<&str>| events.iter().map(f).collect::<Vec<_>>();
        let at: Vec<i64> = events.iter().map(|e| e.at_ms).collect();
        let action: Vec<&str> = events.iter().map(|e| e.action.as_str()).collect();
        let result: Vec<&str> = events.iter().map(|e| e.result.as_str()).collect();
        let (principal, token_id, target, detail, correlation_id, target_type) = (
            column(|e| e.principal.as_deref()),
            column(|e| e.token_id.as_deref()),
            column(|e| e.target.as_deref()),
            column(|e| e.detail.as_deref()),
            column(|e| e.correlation_id.as_deref()),
            column(|e| e.target_type.as_deref()),
        );
        pg(async {
            let mut c = self.conn().await?;
            // A batch nobody waits on does not wait for the disk; a state-changing call's does.
            let tx = if durable { c.transaction().await? } else { relaxed(&mut c).await? };
            // One statement for the whole batch: one round trip, however many rows.
            execute(
                &tx,
                "INSERT INTO audit (at_ms, principal, token_id, action, target, result, detail, correlation_id, target_type, replica)
                 SELECT *, $10 FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])",
                &[&at, &principal, &token_id, &action, &target, &result, &detail, &correlation_id, &target_type, &self.replica()],
            )
            .await?;
            Ok(tx.commit().await?)
        })
        .await
    }

    async fn query(&self, f: &AuditFilter) -> Result<Vec<AuditEvent>> {
        pg(async {
            let c = self.conn().await?;
            let found = rows(
                &*c,
                "SELECT at_ms, principal, token_id, action, target, result, detail, correlation_id, replica, target_type FROM audit
                 WHERE ($1::bigint IS NULL OR at_ms >= $1) AND ($2::bigint IS NULL OR at_ms <= $2)
                   AND ($3::text IS NULL OR principal = $3) AND ($4::text IS NULL OR starts_with(action, $4))
                   AND ($5::text IS NULL OR result = $5) AND ($6::text IS NULL OR correlation_id = $6)
                   AND ($8::text IS NULL OR target_type = $8)
                 ORDER BY id DESC LIMIT $7",
                &[&f.since_ms, &f.until_ms, &f.principal, &f.action_prefix, &f.result, &f.correlation_id, &f.limit, &f.target_type],
            )
            .await?;
            found
                .iter()
                .map(|r| {
                    Ok(AuditEvent {
                        at_ms: r.try_get(0)?,
                        principal: r.try_get(1)?,
                        token_id: r.try_get(2)?,
                        action: r.try_get(3)?,
                        target: r.try_get(4)?,
                        target_type: r.try_get(9)?,
                        result: r.try_get(5)?,
                        detail: r.try_get(6)?,
                        correlation_id: r.try_get(7)?,
                        replica: r.try_get(8)?,
                    })
                })
                .collect()
        })
        .await
    }

    async fn prune(&self, before_ms: i64) -> Result<u64> {
        pg(async { execute(&*self.conn().await?, "DELETE FROM audit WHERE at_ms < $1", &[&before_ms]).await }).await
    }
}

/// Reads the current value with `select`, then runs `upsert`, in one transaction with the
/// row locked: returns the value that was replaced.
async fn replace_returning_previous(
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
async fn delete_returning(
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
        pg(replace_returning_previous(
            self,
            "SELECT value FROM agent_tag WHERE agent_id = $1 AND key = $2",
            &[&agent_id, &key],
            "INSERT INTO agent_tag (agent_id, key, value, updated_at, updated_by) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (agent_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at,
             updated_by = excluded.updated_by",
            &[&agent_id, &key, &value, &change.at, &change.by],
        ))
        .await
    }

    async fn delete_agent_tag(&self, agent_id: &str, key: &str) -> Result<Option<String>> {
        pg(async {
            let c = self.conn().await?;
            delete_returning(
                &*c,
                "DELETE FROM agent_tag WHERE agent_id = $1 AND key = $2 RETURNING value",
                &[&agent_id, &key],
            )
            .await
        })
        .await
    }
}

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
            kill_switch(&*c, plugin, action).await
        })
        .await
    }
}

#[async_trait]
impl GroupStore for PostgresStore {
    async fn management_groups(&self) -> Result<Vec<ManagementGroup>> {
        pg(async {
            let c = self.conn().await?;
            rows(&*c, "SELECT id, name, description FROM management_group ORDER BY name, id", &[])
                .await?
                .iter()
                .map(|r| Ok(ManagementGroup { id: r.try_get(0)?, name: r.try_get(1)?, description: r.try_get(2)? }))
                .collect()
        })
        .await
    }
}

//! Plugin secrets and KEK versions in SQLite (see [`crate::SecretStore`]).

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use toolgate_domain::plugin_secrets::{KekVersion, SecretMeta, SecretRow};

use super::SqliteStore;
use crate::plugin_secrets::{Result, SECRET_COLUMNS, SecretStore};

fn secret_row(r: &rusqlite::Row) -> rusqlite::Result<SecretRow> {
    Ok(SecretRow {
        plugin: r.get(0)?,
        key: r.get(1)?,
        version: r.get(2)?,
        kek_version: r.get(3)?,
        wrapped_key: r.get(4)?,
        ciphertext: r.get(5)?,
        updated_at: r.get(6)?,
        updated_by: r.get(7)?,
    })
}

#[async_trait]
impl SecretStore for SqliteStore {
    async fn secret(&self, plugin: &str, key: &str) -> Result<Option<SecretRow>> {
        let (plugin, key) = (plugin.to_string(), key.to_string());
        self.run(move |c| {
            c.query_row(
                &format!("SELECT {SECRET_COLUMNS} FROM plugin_secret WHERE plugin = ?1 AND key = ?2"),
                params![plugin, key],
                secret_row,
            )
            .optional()
        })
        .await
    }

    async fn put_secret(&self, row: &SecretRow, replacing: Option<u32>) -> Result<bool> {
        let row = row.clone();
        self.run(move |c| {
            // The row's eight columns, then the version it replaces (the update's condition).
            let values: [&dyn rusqlite::ToSql; 9] = [
                &row.plugin,
                &row.key,
                &row.version,
                &row.kek_version,
                &row.wrapped_key,
                &row.ciphertext,
                &row.updated_at,
                &row.updated_by,
                &replacing,
            ];
            let changed = match replacing {
                None => c.execute(
                    &format!(
                        "INSERT INTO plugin_secret ({SECRET_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                         ON CONFLICT (plugin, key) DO NOTHING"
                    ),
                    &values[..8],
                )?,
                Some(_) => c.execute(
                    "UPDATE plugin_secret SET version = ?3, kek_version = ?4, wrapped_key = ?5, ciphertext = ?6,
                         updated_at = ?7, updated_by = ?8 WHERE plugin = ?1 AND key = ?2 AND version = ?9",
                    &values[..],
                )?,
            };
            Ok(changed == 1)
        })
        .await
    }

    async fn delete_secret(&self, plugin: &str, key: &str) -> Result<Option<SecretMeta>> {
        let (plugin, key) = (plugin.to_string(), key.to_string());
        self.run(move |c| {
            let found = c
                .query_row(
                    &format!("DELETE FROM plugin_secret WHERE plugin = ?1 AND key = ?2 RETURNING {SECRET_COLUMNS}"),
                    params![plugin, key],
                    secret_row,
                )
                .optional()?;
            Ok(found.map(|r| r.meta()))
        })
        .await
    }

    async fn secrets(&self, plugin: Option<&str>) -> Result<Vec<SecretMeta>> {
        let plugin = plugin.map(str::to_string);
        self.run(move |c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {SECRET_COLUMNS} FROM plugin_secret WHERE ?1 IS NULL OR plugin = ?1 ORDER BY plugin, key"
            ))?;
            stmt.query_map(params![plugin], |r| secret_row(r).map(|s| s.meta()))?.collect()
        })
        .await
    }

    async fn wrapped_below(&self, version: u32, limit: usize) -> Result<Vec<SecretRow>> {
        self.run(move |c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {SECRET_COLUMNS} FROM plugin_secret WHERE kek_version < ?1 ORDER BY plugin, key LIMIT ?2"
            ))?;
            stmt.query_map(params![version, limit as i64], secret_row)?.collect()
        })
        .await
    }

    async fn rewrap_secret(&self, row: &SecretRow, from_kek: u32) -> Result<bool> {
        let row = row.clone();
        self.run(move |c| {
            let changed = c.execute(
                "UPDATE plugin_secret SET kek_version = ?4, wrapped_key = ?5
                 WHERE plugin = ?1 AND key = ?2 AND version = ?3 AND kek_version = ?6",
                params![row.plugin, row.key, row.version, row.kek_version, row.wrapped_key, from_kek],
            )?;
            Ok(changed == 1)
        })
        .await
    }

    async fn kek_versions(&self) -> Result<Vec<KekVersion>> {
        self.run(|c| {
            let mut stmt =
                c.prepare("SELECT version, fingerprint, activated_at, activated_by FROM kek_version ORDER BY version")?;
            stmt.query_map([], |r| {
                Ok(KekVersion {
                    version: r.get(0)?,
                    fingerprint: r.get(1)?,
                    activated_at: r.get(2)?,
                    activated_by: r.get(3)?,
                })
            })?
            .collect()
        })
        .await
    }

    async fn activate_kek(&self, version: &KekVersion) -> Result<bool> {
        let v = version.clone();
        self.run(move |c| {
            let inserted = c.execute(
                "INSERT INTO kek_version (version, fingerprint, activated_at, activated_by) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (version) DO NOTHING",
                params![v.version, v.fingerprint, v.activated_at, v.activated_by],
            )?;
            Ok(inserted == 1)
        })
        .await
    }
}

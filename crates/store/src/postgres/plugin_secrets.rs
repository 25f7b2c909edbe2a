//! Plugin secrets and KEK versions on PostgreSQL (see [`crate::SecretStore`] and the SQLite
//! twin).

use async_trait::async_trait;
use toolgate_domain::plugin_secrets::{KekVersion, SecretMeta, SecretRow};

use super::{Pg, PostgresStore, execute, pg, row, rows};
use crate::plugin_secrets::{Result, SECRET_COLUMNS, SecretStore};

/// PostgreSQL's `INTEGER` is signed; versions never come near its end.
fn version(value: i32) -> u32 {
    u32::try_from(value).unwrap_or_default()
}

fn stored(value: u32) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

fn secret_row(r: &tokio_postgres::Row) -> Pg<SecretRow> {
    Ok(SecretRow {
        plugin: r.try_get(0)?,
        key: r.try_get(1)?,
        version: version(r.try_get(2)?),
        kek_version: version(r.try_get(3)?),
        wrapped_key: r.try_get(4)?,
        ciphertext: r.try_get(5)?,
        updated_at: r.try_get(6)?,
        updated_by: r.try_get(7)?,
    })
}

#[async_trait]
impl SecretStore for PostgresStore {
    async fn secret(&self, plugin: &str, key: &str) -> Result<Option<SecretRow>> {
        pg(async {
            let sql = format!("SELECT {SECRET_COLUMNS} FROM plugin_secret WHERE plugin = $1 AND key = $2");
            row(&*self.conn().await?, &sql, &[&plugin, &key]).await?.as_ref().map(secret_row).transpose()
        })
        .await
    }

    async fn put_secret(&self, r: &SecretRow, replacing: Option<u32>) -> Result<bool> {
        pg(async {
            let c = self.conn().await?;
            let (v, kek, previous) = (stored(r.version), stored(r.kek_version), replacing.map(stored));
            // The row's eight columns, then the version it replaces (the update's condition).
            let values: [&(dyn tokio_postgres::types::ToSql + Sync); 9] =
                [&r.plugin, &r.key, &v, &kek, &r.wrapped_key, &r.ciphertext, &r.updated_at, &r.updated_by, &previous];
            let changed = match replacing {
                None => {
                    let sql = format!(
                        "INSERT INTO plugin_secret ({SECRET_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                         ON CONFLICT (plugin, key) DO NOTHING"
                    );
                    execute(&*c, &sql, &values[..8]).await?
                }
                Some(_) => {
                    let sql =
                        "UPDATE plugin_secret SET version = $3, kek_version = $4, wrapped_key = $5, ciphertext = $6,
                             updated_at = $7, updated_by = $8 WHERE plugin = $1 AND key = $2 AND version = $9";
                    execute(&*c, sql, &values).await?
                }
            };
            Ok(changed == 1)
        })
        .await
    }

    async fn delete_secret(&self, plugin: &str, key: &str) -> Result<Option<SecretMeta>> {
        pg(async {
            let sql = format!("DELETE FROM plugin_secret WHERE plugin = $1 AND key = $2 RETURNING {SECRET_COLUMNS}");
            let found = row(&*self.conn().await?, &sql, &[&plugin, &key]).await?;
            Ok(found.as_ref().map(secret_row).transpose()?.map(|r| r.meta()))
        })
        .await
    }

    async fn secrets(&self, plugin: Option<&str>) -> Result<Vec<SecretMeta>> {
        pg(async {
            let sql = format!(
                "SELECT {SECRET_COLUMNS} FROM plugin_secret WHERE $1::TEXT IS NULL OR plugin = $1 ORDER BY plugin, key"
            );
            rows(&*self.conn().await?, &sql, &[&plugin]).await?.iter().map(|r| Ok(secret_row(r)?.meta())).collect()
        })
        .await
    }

    async fn wrapped_below(&self, below: u32, limit: usize) -> Result<Vec<SecretRow>> {
        pg(async {
            let sql = format!(
                "SELECT {SECRET_COLUMNS} FROM plugin_secret WHERE kek_version < $1 ORDER BY plugin, key LIMIT $2"
            );
            let (below, limit) = (stored(below), limit as i64);
            rows(&*self.conn().await?, &sql, &[&below, &limit]).await?.iter().map(secret_row).collect()
        })
        .await
    }

    async fn rewrap_secret(&self, r: &SecretRow, from_kek: u32) -> Result<bool> {
        pg(async {
            let (v, kek, from) = (stored(r.version), stored(r.kek_version), stored(from_kek));
            let changed = execute(
                &*self.conn().await?,
                "UPDATE plugin_secret SET kek_version = $4, wrapped_key = $5
                 WHERE plugin = $1 AND key = $2 AND version = $3 AND kek_version = $6",
                &[&r.plugin, &r.key, &v, &kek, &r.wrapped_key, &from],
            )
            .await?;
            Ok(changed == 1)
        })
        .await
    }

    async fn kek_versions(&self) -> Result<Vec<KekVersion>> {
        pg(async {
            let sql = "SELECT version, fingerprint, activated_at, activated_by FROM kek_version ORDER BY version";
            rows(&*self.conn().await?, sql, &[])
                .await?
                .iter()
                .map(|r| {
                    Ok(KekVersion {
                        version: version(r.try_get(0)?),
                        fingerprint: r.try_get(1)?,
                        activated_at: r.try_get(2)?,
                        activated_by: r.try_get(3)?,
                    })
                })
                .collect()
        })
        .await
    }

    async fn activate_kek(&self, k: &KekVersion) -> Result<bool> {
        pg(async {
            let inserted = execute(
                &*self.conn().await?,
                "INSERT INTO kek_version (version, fingerprint, activated_at, activated_by) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (version) DO NOTHING",
                &[&stored(k.version), &k.fingerprint, &k.activated_at, &k.activated_by],
            )
            .await?;
            Ok(inserted == 1)
        })
        .await
    }
}

//! Issued agent certificates on PostgreSQL (see [`crate::CertStore`]).

use async_trait::async_trait;
use tokio_postgres::types::ToSql;
use toolgate_domain::certs::IssuedCert;

use toolgate_domain::groups::Reach;

use super::confinement::{reach_agents, reach_param};
use super::{PostgresStore, execute, pg, row, rows};
use crate::certs::{CERT_COLUMNS, CERT_READ_COLUMNS, CertStore, Result, revocation};

fn cert_row(r: &tokio_postgres::Row) -> super::Pg<IssuedCert> {
    let generation: i32 = r.try_get(2)?;
    Ok(IssuedCert {
        serial_hex: r.try_get(0)?,
        agent_id: r.try_get(1)?,
        ca_generation: u32::try_from(generation).unwrap_or_default(),
        not_before_ms: r.try_get(3)?,
        not_after_ms: r.try_get(4)?,
        issued_at_ms: r.try_get(5)?,
        reason: r.try_get(6)?,
        revoked: revocation(r.try_get(7)?, r.try_get(8)?, r.try_get(9)?),
    })
}

/// ` AND agent_id IN (…)` over the reach's array parameter `$n`; nothing fleet-wide.
fn within(groups: &Option<Vec<String>>, n: usize) -> String {
    match groups {
        Some(_) => format!(" AND agent_id IN ({})", reach_agents(n)),
        None => String::new(),
    }
}

#[async_trait]
impl CertStore for PostgresStore {
    async fn record_issued(&self, c: &IssuedCert) -> Result<()> {
        pg(async {
            let generation = i32::try_from(c.ca_generation).unwrap_or(i32::MAX);
            let sql = format!("INSERT INTO issued_cert ({CERT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)");
            let values: [&(dyn ToSql + Sync); 7] = [
                &c.serial_hex,
                &c.agent_id,
                &generation,
                &c.not_before_ms,
                &c.not_after_ms,
                &c.issued_at_ms,
                &c.reason,
            ];
            execute(&*self.conn().await?, &sql, &values).await.map(drop)
        })
        .await
    }

    async fn issued(&self, reach: &Reach, limit: usize, offset: usize) -> Result<(Vec<IssuedCert>, u64)> {
        pg(async {
            let c = self.conn().await?;
            let groups = reach_param(reach);
            let mut counted: Vec<&(dyn ToSql + Sync)> = Vec::new();
            if let Some(groups) = &groups {
                counted.push(groups);
            }
            let count = format!("SELECT count(*) FROM issued_cert WHERE TRUE{}", within(&groups, 1));
            let total: i64 = row(&*c, &count, &counted).await?.map_or(Ok(0), |r| r.try_get(0))?;
            let sql = format!(
                "SELECT {CERT_READ_COLUMNS} FROM issued_cert WHERE TRUE{} \
                 ORDER BY issued_at_ms DESC, serial_hex LIMIT $1 OFFSET $2",
                within(&groups, 3)
            );
            let (limit, offset) = (limit as i64, offset as i64);
            let mut values: Vec<&(dyn ToSql + Sync)> = vec![&limit, &offset];
            if let Some(groups) = &groups {
                values.push(groups);
            }
            let found = rows(&*c, &sql, &values).await?;
            let certs = found.iter().map(cert_row).collect::<super::Pg<Vec<_>>>()?;
            Ok((certs, total as u64))
        })
        .await
    }

    async fn revoke(
        &self,
        serial_hex: &str,
        reach: &Reach,
        by: &str,
        reason: Option<&str>,
        now_ms: i64,
    ) -> Result<Option<(IssuedCert, Vec<String>)>> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            let groups = reach_param(reach);
            let select = format!("SELECT agent_id FROM issued_cert WHERE serial_hex = $1{}", within(&groups, 2));
            let mut values: Vec<&(dyn ToSql + Sync)> = vec![&serial_hex];
            if let Some(groups) = &groups {
                values.push(groups);
            }
            let Some(agent_id) = row(&tx, &select, &values).await?.map(|r| r.try_get::<_, String>(0)).transpose()?
            else {
                return Ok(None);
            };
            let update = "UPDATE issued_cert SET revoked_at_ms = $2, revoked_by = $3, revocation_reason = $4 \
                          WHERE agent_id = $1 AND revoked_at_ms IS NULL RETURNING serial_hex";
            let revoked = rows(&tx, update, &[&agent_id, &now_ms, &by, &reason]).await?;
            let revoked_now = revoked.iter().map(|r| r.try_get(0)).collect::<std::result::Result<Vec<String>, _>>()?;
            let select = format!("SELECT {CERT_READ_COLUMNS} FROM issued_cert WHERE serial_hex = $1");
            let found = row(&tx, &select, &[&serial_hex]).await?.as_ref().map(cert_row).transpose()?;
            tx.commit().await?;
            Ok(found.map(|cert| (cert, revoked_now)))
        })
        .await
    }

    async fn revoked_serials(&self, now_ms: i64) -> Result<Vec<(String, String)>> {
        pg(async {
            let sql =
                "SELECT serial_hex, agent_id FROM issued_cert WHERE revoked_at_ms IS NOT NULL AND not_after_ms > $1";
            let found = rows(&*self.conn().await?, sql, &[&now_ms]).await?;
            let pairs = found.iter().map(|r| Ok((r.try_get(0)?, r.try_get(1)?)));
            Ok(pairs.collect::<std::result::Result<Vec<(String, String)>, tokio_postgres::Error>>()?)
        })
        .await
    }

    async fn live_by_generation(&self, now_ms: i64) -> Result<Vec<(u32, u64)>> {
        pg(async {
            let sql = "SELECT ca_generation, count(*) FROM issued_cert WHERE revoked_at_ms IS NULL AND not_after_ms > $1 \
                       GROUP BY ca_generation ORDER BY ca_generation";
            let found = rows(&*self.conn().await?, sql, &[&now_ms]).await?;
            let counted = found.iter().map(|r| Ok((r.try_get::<_, i32>(0)? as u32, r.try_get::<_, i64>(1)? as u64)));
            Ok(counted.collect::<std::result::Result<Vec<_>, tokio_postgres::Error>>()?)
        })
        .await
    }

    async fn newest_for(&self, agent_id: &str) -> Result<Option<IssuedCert>> {
        pg(async {
            let sql = format!(
                "SELECT {CERT_READ_COLUMNS} FROM issued_cert WHERE agent_id = $1 \
                 ORDER BY issued_at_ms DESC, serial_hex DESC LIMIT 1"
            );
            let found = row(&*self.conn().await?, &sql, &[&agent_id]).await?;
            found.as_ref().map(cert_row).transpose()
        })
        .await
    }
}

//! Issued agent certificates on PostgreSQL (see [`crate::CertStore`]).

use async_trait::async_trait;
use toolgate_domain::certs::IssuedCert;

use toolgate_domain::groups::Reach;

use super::confinement::{reach_agents, reach_param};
use super::{PostgresStore, execute, pg, row, rows};
use crate::certs::{CERT_COLUMNS, CertStore, Result};

#[async_trait]
impl CertStore for PostgresStore {
    async fn record_issued(&self, c: &IssuedCert) -> Result<()> {
        pg(async {
            let generation = i32::try_from(c.ca_generation).unwrap_or(i32::MAX);
            let sql = format!("INSERT INTO issued_cert ({CERT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)");
            let values: [&(dyn tokio_postgres::types::ToSql + Sync); 7] = [
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
            let confined = |n: usize| match &groups {
                Some(_) => format!("WHERE agent_id IN ({})", reach_agents(n)),
                None => String::new(),
            };
            let mut counted: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = Vec::new();
            if let Some(groups) = &groups {
                counted.push(groups);
            }
            let count = format!("SELECT count(*) FROM issued_cert {}", confined(1));
            let total: i64 = row(&*c, &count, &counted).await?.map_or(Ok(0), |r| r.try_get(0))?;
            let sql = format!(
                "SELECT {CERT_COLUMNS} FROM issued_cert {} ORDER BY issued_at_ms DESC, serial_hex LIMIT $1 OFFSET $2",
                confined(3)
            );
            let (limit, offset) = (limit as i64, offset as i64);
            let mut values: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&limit, &offset];
            if let Some(groups) = &groups {
                values.push(groups);
            }
            let found = rows(&*c, &sql, &values).await?;
            let certs = found
                .iter()
                .map(|r| {
                    let generation: i32 = r.try_get(2)?;
                    Ok(IssuedCert {
                        serial_hex: r.try_get(0)?,
                        agent_id: r.try_get(1)?,
                        ca_generation: u32::try_from(generation).unwrap_or_default(),
                        not_before_ms: r.try_get(3)?,
                        not_after_ms: r.try_get(4)?,
                        issued_at_ms: r.try_get(5)?,
                        reason: r.try_get(6)?,
                    })
                })
                .collect::<super::Pg<Vec<_>>>()?;
            Ok((certs, total as u64))
        })
        .await
    }
}

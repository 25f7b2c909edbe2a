//! Issued agent certificates in SQLite (see [`crate::CertStore`]).

use async_trait::async_trait;
use rusqlite::params;
use toolgate_domain::certs::IssuedCert;

use toolgate_domain::groups::Reach;

use super::SqliteStore;
use super::confinement::{reach_agents, reach_param};
use crate::certs::{CERT_COLUMNS, CertStore, Result};

#[async_trait]
impl CertStore for SqliteStore {
    async fn record_issued(&self, cert: &IssuedCert) -> Result<()> {
        let c = cert.clone();
        self.run(move |conn| {
            conn.execute(
                &format!("INSERT INTO issued_cert ({CERT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
                params![
                    c.serial_hex,
                    c.agent_id,
                    c.ca_generation,
                    c.not_before_ms,
                    c.not_after_ms,
                    c.issued_at_ms,
                    c.reason
                ],
            )
            .map(drop)
        })
        .await
    }

    async fn issued(&self, reach: &Reach, limit: usize, offset: usize) -> Result<(Vec<IssuedCert>, u64)> {
        let groups = reach_param(reach);
        self.run(move |conn| {
            let confined = match groups {
                Some(_) => format!("WHERE agent_id IN ({})", reach_agents("?3")),
                None => String::new(),
            };
            let total: i64 = conn.query_row(
                &format!("SELECT count(*) FROM issued_cert {}", confined.replace("?3", "?1")),
                rusqlite::params_from_iter(groups.iter()),
                |r| r.get(0),
            )?;
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {CERT_COLUMNS} FROM issued_cert {confined} ORDER BY issued_at_ms DESC, serial_hex LIMIT ?1 OFFSET ?2"
            ))?;
            let mut values: Vec<rusqlite::types::Value> = vec![(limit as i64).into(), (offset as i64).into()];
            values.extend(groups.map(Into::into));
            let rows = stmt
                .query_map(rusqlite::params_from_iter(values), |r| {
                    Ok(IssuedCert {
                        serial_hex: r.get(0)?,
                        agent_id: r.get(1)?,
                        ca_generation: r.get(2)?,
                        not_before_ms: r.get(3)?,
                        not_after_ms: r.get(4)?,
                        issued_at_ms: r.get(5)?,
                        reason: r.get(6)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok((rows, total as u64))
        })
        .await
    }
}

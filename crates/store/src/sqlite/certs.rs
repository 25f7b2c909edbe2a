//! Issued agent certificates in SQLite (see [`crate::CertStore`]).

use async_trait::async_trait;
use rusqlite::params;
use toolgate_domain::certs::IssuedCert;

use super::SqliteStore;
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

    async fn issued(&self, limit: usize, offset: usize) -> Result<(Vec<IssuedCert>, u64)> {
        self.run(move |conn| {
            let total: i64 = conn.query_row("SELECT count(*) FROM issued_cert", [], |r| r.get(0))?;
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {CERT_COLUMNS} FROM issued_cert ORDER BY issued_at_ms DESC, serial_hex LIMIT ?1 OFFSET ?2"
            ))?;
            let rows = stmt
                .query_map(params![limit as i64, offset as i64], |r| {
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

//! Issued agent certificates in SQLite (see [`crate::CertStore`]).

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use toolgate_domain::certs::IssuedCert;

use toolgate_domain::groups::Reach;

use super::SqliteStore;
use super::confinement::{reach_agents, reach_param};
use crate::certs::{CERT_COLUMNS, CERT_READ_COLUMNS, CertStore, Result, revocation};

fn cert_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<IssuedCert> {
    Ok(IssuedCert {
        serial_hex: r.get(0)?,
        agent_id: r.get(1)?,
        ca_generation: r.get(2)?,
        not_before_ms: r.get(3)?,
        not_after_ms: r.get(4)?,
        issued_at_ms: r.get(5)?,
        reason: r.get(6)?,
        revoked: revocation(r.get(7)?, r.get(8)?, r.get(9)?),
    })
}

/// ` AND agent_id IN (…)` over the reach's JSON parameter at `placeholder`; nothing fleet-wide.
fn within(groups: &Option<String>, placeholder: &str) -> String {
    match groups {
        Some(_) => format!(" AND agent_id IN ({})", reach_agents(placeholder)),
        None => String::new(),
    }
}

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
            let total: i64 = conn.query_row(
                &format!("SELECT count(*) FROM issued_cert WHERE 1 = 1{}", within(&groups, "?1")),
                rusqlite::params_from_iter(groups.iter()),
                |r| r.get(0),
            )?;
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {CERT_READ_COLUMNS} FROM issued_cert WHERE 1 = 1{} \
                 ORDER BY issued_at_ms DESC, serial_hex LIMIT ?1 OFFSET ?2",
                within(&groups, "?3")
            ))?;
            let mut values: Vec<rusqlite::types::Value> = vec![(limit as i64).into(), (offset as i64).into()];
            values.extend(groups.map(Into::into));
            let rows =
                stmt.query_map(rusqlite::params_from_iter(values), cert_row)?.collect::<rusqlite::Result<_>>()?;
            Ok((rows, total as u64))
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
        let (serial, by, reason) = (serial_hex.to_string(), by.to_string(), reason.map(String::from));
        let groups = reach_param(reach);
        self.run(move |conn| {
            let tx = conn.transaction()?;
            let mut values: Vec<rusqlite::types::Value> = vec![serial.clone().into()];
            values.extend(groups.clone().map(Into::into));
            let sql = format!("SELECT agent_id FROM issued_cert WHERE serial_hex = ?1{}", within(&groups, "?2"));
            let Some(agent_id) =
                tx.query_row(&sql, rusqlite::params_from_iter(values), |r| r.get::<_, String>(0)).optional()?
            else {
                return Ok(None);
            };
            let revoked_now = {
                let mut stmt = tx.prepare(
                    "UPDATE issued_cert SET revoked_at_ms = ?2, revoked_by = ?3, revocation_reason = ?4 \
                     WHERE agent_id = ?1 AND revoked_at_ms IS NULL RETURNING serial_hex",
                )?;
                let rows = stmt.query_map(params![agent_id, now_ms, by, reason], |r| r.get::<_, String>(0))?;
                rows.collect::<rusqlite::Result<Vec<String>>>()?
            };
            let sql = format!("SELECT {CERT_READ_COLUMNS} FROM issued_cert WHERE serial_hex = ?1");
            let found = tx.query_row(&sql, [&serial], cert_row)?;
            tx.commit()?;
            Ok(Some((found, revoked_now)))
        })
        .await
    }

    async fn revoked_serials(&self, now_ms: i64) -> Result<Vec<(String, String)>> {
        self.run(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT serial_hex, agent_id FROM issued_cert WHERE revoked_at_ms IS NOT NULL AND not_after_ms > ?1",
            )?;
            let rows = stmt.query_map([now_ms], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<_>>()?;
            Ok(rows)
        })
        .await
    }

    async fn live_by_generation(&self, now_ms: i64) -> Result<Vec<(u32, u64)>> {
        self.run(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT ca_generation, count(*) FROM issued_cert WHERE revoked_at_ms IS NULL AND not_after_ms > ?1 \
                 GROUP BY ca_generation ORDER BY ca_generation",
            )?;
            let rows = stmt.query_map([now_ms], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))?;
            rows.collect()
        })
        .await
    }

    async fn newest_for(&self, agent_id: &str) -> Result<Option<IssuedCert>> {
        let agent_id = agent_id.to_string();
        self.run(move |conn| {
            let sql = format!(
                "SELECT {CERT_READ_COLUMNS} FROM issued_cert WHERE agent_id = ?1 \
                 ORDER BY issued_at_ms DESC, serial_hex DESC LIMIT 1"
            );
            conn.query_row(&sql, [agent_id], cert_row).optional()
        })
        .await
    }
}

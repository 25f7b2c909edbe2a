//! The fleet in SQLite: enrollment tokens, agents, and inventory rows as JSON.

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use toolgate_domain::StoreError;
use toolgate_domain::fleet::agent::{AGENT_SECRET_PREFIX, AgentAuth, InventoryStatus, new_agent_id};
use toolgate_domain::fleet::wire::InventoryReport;
use toolgate_domain::fleet::{AgentStatus, AgentSummary, EnrollRefusal, EnrollmentToken, HostFacts};
use toolgate_domain::groups::Reach;
use toolgate_domain::secrets::{hash_secret, new_secret};

use super::confinement::{reach_agents, reach_param};
use super::json_rows::{chunk, page};
use super::{SqliteStore, without_fsync};
use crate::filtered::filtered_page;
use crate::rules::{agent_auth, enroll_refusal, new_enrollment_token};
use crate::{ColumnCondition, FleetStore, RowFilter, RowPage, RowSource};

type Result<T> = std::result::Result<T, StoreError>;

fn enrollment_row(r: &rusqlite::Row) -> rusqlite::Result<EnrollmentToken> {
    Ok(EnrollmentToken {
        id: r.get(0)?,
        created_at_ms: r.get(1)?,
        expires_at_ms: r.get(2)?,
        uses_allowed: r.get(3)?,
        uses: r.get(4)?,
    })
}

fn redeem(
    c: &mut Connection,
    hash: &str,
    now_ms: i64,
) -> rusqlite::Result<std::result::Result<(String, String), EnrollRefusal>> {
    let tx = c.transaction()?;
    let token = tx
        .query_row(
            "SELECT id, created_at_ms, expires_at_ms, uses_allowed, uses FROM enrollment_token WHERE secret_hash = ?1",
            params![hash],
            enrollment_row,
        )
        .optional()?;
    let Some(token) = token else { return Ok(Err(EnrollRefusal::Unknown)) };
    if let Some(refusal) = enroll_refusal(&token, now_ms) {
        return Ok(Err(refusal));
    }
    tx.execute("UPDATE enrollment_token SET uses = uses + 1 WHERE id = ?1", params![token.id])?;
    let (agent_id, credential) = (new_agent_id(), new_secret(AGENT_SECRET_PREFIX));
    tx.execute(
        "INSERT INTO agent (agent_id, credential_hash, enrolled_at_ms, enrolled_with) VALUES (?1, ?2, ?3, ?4)",
        params![agent_id, hash_secret(&credential), now_ms, token.id],
    )?;
    super::groups::refresh_agent_rules(&tx, &agent_id)?;
    tx.commit()?;
    Ok(Ok((agent_id, credential)))
}

fn agent_row(r: &rusqlite::Row) -> rusqlite::Result<(AgentSummary, Option<String>)> {
    let revoked_at_ms: Option<i64> = r.get(3)?;
    Ok((
        AgentSummary {
            agent_id: r.get(0)?,
            status: if revoked_at_ms.is_some() { AgentStatus::Revoked } else { AgentStatus::Offline },
            enrolled_at_ms: r.get(1)?,
            last_seen_ms: r.get(2)?,
            revoked_at_ms,
            facts: None,
            facts_at_ms: r.get(5)?,
        },
        r.get(4)?,
    ))
}

fn replace_inventory(
    c: &mut Connection,
    agent_id: &str,
    report: &InventoryReport,
    received_at_ms: i64,
) -> rusqlite::Result<()> {
    let tx = c.transaction()?;
    tx.execute("DELETE FROM inventory_row WHERE table_name = ?1 AND agent_id = ?2", params![report.table, agent_id])?;
    {
        let mut insert =
            tx.prepare_cached("INSERT INTO inventory_row (table_name, agent_id, row) VALUES (?1, ?2, ?3)")?;
        for row in &report.rows {
            let text = serde_json::to_string(row).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
            insert.execute(params![report.table, agent_id, text])?;
        }
    }
    tx.execute(
        "INSERT INTO inventory_table (agent_id, table_name, collected_at_ms, received_at_ms, available, reason, row_count)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (agent_id, table_name) DO UPDATE SET collected_at_ms = excluded.collected_at_ms,
           received_at_ms = excluded.received_at_ms, available = excluded.available, reason = excluded.reason,
           row_count = excluded.row_count",
        params![
            agent_id,
            report.table,
            report.collected_at_ms,
            received_at_ms,
            report.available,
            report.reason,
            report.rows.len() as i64
        ],
    )?;
    tx.commit()
}

impl SqliteStore {
    /// Every agent, or the one named.
    async fn agents_where(&self, agent_id: Option<String>) -> Result<Vec<AgentSummary>> {
        let rows = self
            .run(move |c| {
                let mut stmt = c.prepare_cached(
                    "SELECT agent_id, enrolled_at_ms, last_seen_ms, revoked_at_ms, facts, facts_at_ms FROM agent
                     WHERE ?1 IS NULL OR agent_id = ?1 ORDER BY agent_id",
                )?;
                stmt.query_map(params![agent_id], agent_row)?.collect::<rusqlite::Result<Vec<_>>>()
            })
            .await?;
        rows.into_iter()
            .map(|(mut agent, facts)| {
                agent.facts = facts.map(|f| serde_json::from_str(&f)).transpose().map_err(StoreError::backend)?;
                Ok(agent)
            })
            .collect()
    }
}

#[async_trait]
impl FleetStore for SqliteStore {
    async fn create_enrollment_token(
        &self,
        expires_at_ms: i64,
        uses_allowed: i64,
        now_ms: i64,
    ) -> Result<(EnrollmentToken, String)> {
        let (token, secret) = new_enrollment_token(expires_at_ms, uses_allowed, now_ms);
        let (row, hash) = (token.clone(), hash_secret(&secret));
        self.run(move |c| {
            c.execute(
                "INSERT INTO enrollment_token (id, secret_hash, created_at_ms, expires_at_ms, uses_allowed) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![row.id, hash, row.created_at_ms, row.expires_at_ms, row.uses_allowed],
            )
        })
        .await?;
        Ok((token, secret))
    }

    async fn enrollment_tokens(&self) -> Result<Vec<EnrollmentToken>> {
        self.run(|c| {
            let mut stmt = c.prepare(
                "SELECT id, created_at_ms, expires_at_ms, uses_allowed, uses FROM enrollment_token ORDER BY created_at_ms DESC, id",
            )?;
            stmt.query_map([], enrollment_row)?.collect()
        })
        .await
    }

    async fn enroll(&self, secret: &str, now_ms: i64) -> Result<std::result::Result<(String, String), EnrollRefusal>> {
        let hash = hash_secret(secret);
        self.run(move |c| redeem(c, &hash, now_ms)).await
    }

    async fn authenticate_agent(&self, agent_id: &str, credential: &str) -> Result<AgentAuth> {
        let (agent_id, hash) = (agent_id.to_string(), hash_secret(credential));
        self.run(move |c| {
            let row: Option<(String, Option<i64>)> = c
                .query_row(
                    "SELECT credential_hash, revoked_at_ms FROM agent WHERE agent_id = ?1",
                    params![agent_id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            Ok(agent_auth(row, &hash))
        })
        .await
    }

    async fn agents(&self) -> Result<Vec<AgentSummary>> {
        self.agents_where(None).await
    }

    async fn agent(&self, agent_id: &str) -> Result<Option<AgentSummary>> {
        Ok(self.agents_where(Some(agent_id.to_string())).await?.pop())
    }

    async fn save_facts(&self, agent_id: &str, facts: &HostFacts, collected_at_ms: i64) -> Result<()> {
        let (agent_id, facts) = (agent_id.to_string(), serde_json::to_string(facts).map_err(StoreError::backend)?);
        // Reports are sent again on the next connection or schedule: no fsync for them.
        self.run(move |c| {
            without_fsync(c, |c| {
                let tx = c.transaction()?;
                tx.execute(
                    "UPDATE agent SET facts = ?2, facts_at_ms = ?3 WHERE agent_id = ?1",
                    params![agent_id, facts, collected_at_ms],
                )?;
                // Rules read facts: membership follows them in the same commit.
                super::groups::refresh_agent_rules(&tx, &agent_id)?;
                tx.commit()
            })
        })
        .await
    }

    async fn save_last_seen(&self, seen: &[(String, i64)]) -> Result<()> {
        let seen = seen.to_vec();
        // When an agent was last seen is a hint, written again at the next sweep: no fsync.
        self.run(move |c| {
            without_fsync(c, |c| {
                let tx = c.transaction()?;
                {
                    let mut update = tx.prepare_cached("UPDATE agent SET last_seen_ms = ?2 WHERE agent_id = ?1")?;
                    for (agent_id, at) in &seen {
                        update.execute(params![agent_id, at])?;
                    }
                }
                tx.commit()
            })
        })
        .await
    }

    async fn agent_connected(&self, agent_id: &str, replica: &str, at_ms: i64) -> Result<()> {
        let (agent_id, replica) = (agent_id.to_string(), replica.to_string());
        self.run(move |c| {
            without_fsync(c, |c| {
                c.execute(
                    "UPDATE agent SET connected_to = ?2, last_seen_ms = ?3 WHERE agent_id = ?1",
                    params![agent_id, replica, at_ms],
                )
            })
            .map(drop)
        })
        .await
    }

    async fn agent_disconnected(&self, agent_id: &str, replica: &str, at_ms: i64) -> Result<()> {
        let (agent_id, replica) = (agent_id.to_string(), replica.to_string());
        self.run(move |c| {
            without_fsync(c, |c| {
                c.execute(
                    "UPDATE agent SET connected_to = NULL, last_seen_ms = ?3 WHERE agent_id = ?1 AND connected_to = ?2",
                    params![agent_id, replica, at_ms],
                )
            })
            .map(drop)
        })
        .await
    }

    async fn connected_elsewhere(&self, replica: &str, since_ms: i64) -> Result<Vec<(String, String, i64)>> {
        let replica = replica.to_string();
        self.run(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT agent_id, connected_to, last_seen_ms FROM agent
                 WHERE connected_to IS NOT NULL AND connected_to != ?1 AND last_seen_ms >= ?2 AND revoked_at_ms IS NULL",
            )?;
            stmt.query_map(params![replica, since_ms], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect()
        })
        .await
    }

    async fn revoke_agent(&self, agent_id: &str, now_ms: i64) -> Result<bool> {
        let agent_id = agent_id.to_string();
        self.run(move |c| {
            c.execute(
                "UPDATE agent SET revoked_at_ms = ?2 WHERE agent_id = ?1 AND revoked_at_ms IS NULL",
                params![agent_id, now_ms],
            )
            .map(|n| n == 1)
        })
        .await
    }

    async fn revoked_since(&self, since_ms: i64) -> Result<Vec<String>> {
        self.run(move |c| {
            let mut stmt = c.prepare_cached("SELECT agent_id FROM agent WHERE revoked_at_ms >= ?1")?;
            stmt.query_map(params![since_ms], |r| r.get(0))?.collect()
        })
        .await
    }

    async fn save_inventory(&self, agent_id: &str, report: InventoryReport, received_at_ms: i64) -> Result<()> {
        let agent_id = agent_id.to_string();
        self.run(move |c| without_fsync(c, |c| replace_inventory(c, &agent_id, &report, received_at_ms))).await
    }

    async fn inventory_status(&self, agent_id: &str) -> Result<Vec<InventoryStatus>> {
        let agent_id = agent_id.to_string();
        self.run(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT agent_id, table_name, collected_at_ms, received_at_ms, available, reason, row_count FROM inventory_table
                 WHERE agent_id = ?1 ORDER BY table_name",
            )?;
            stmt.query_map(params![agent_id], |r| {
                Ok(InventoryStatus {
                    agent_id: r.get(0)?,
                    table: r.get(1)?,
                    collected_at_ms: r.get(2)?,
                    received_at_ms: r.get(3)?,
                    available: r.get(4)?,
                    reason: r.get(5)?,
                    rows: r.get(6)?,
                })
            })?
            .collect()
        })
        .await
    }

    async fn inventory_coverage(&self, reach: &Reach) -> Result<Vec<(String, i64, i64)>> {
        let groups = reach_param(reach);
        self.run(move |c| {
            let confined = if groups.is_some() { format!("WHERE agent_id IN ({})", reach_agents("?1")) } else { String::new() };
            let mut stmt = c.prepare_cached(&format!(
                "SELECT table_name, count(*), sum(available = 0) FROM inventory_table {confined} GROUP BY table_name ORDER BY table_name"
            ))?;
            let params = rusqlite::params_from_iter(groups);
            stmt.query_map(params, |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect()
        })
        .await
    }

    async fn inventory_rows(
        &self,
        source: &RowSource,
        conditions: &[ColumnCondition],
        filter: Option<RowFilter>,
        offset: usize,
        limit: usize,
    ) -> Result<RowPage> {
        let (source, conditions) = (source.clone(), conditions.to_vec());
        let Some(filter) = filter else {
            return self.run(move |c| page(c, &source, &conditions, offset, limit)).await;
        };
        let read_after = |after| {
            let (source, conditions) = (source.clone(), conditions.clone());
            self.run(move |c| chunk(c, &source, &conditions, after))
        };
        filtered_page(read_after, filter, offset, limit).await
    }

    async fn all_tags(&self, reach: &Reach) -> Result<Vec<(String, String, String)>> {
        let (condition, groups) = super::experience::confined("agent_id", reach, 1);
        self.read(move |c| {
            let mut stmt = c.prepare(&format!(
                "SELECT agent_id, key, value FROM agent_tag WHERE 1 = 1{condition} ORDER BY agent_id, key"
            ))?;
            stmt.query_map(rusqlite::params_from_iter(groups), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect()
        })
        .await
    }

    async fn tag_values(&self, reach: &Reach, key: &str) -> Result<Vec<(String, String)>> {
        let (condition, groups) = super::experience::confined("agent_id", reach, 2);
        let key = key.to_string();
        self.read(move |c| {
            let mut stmt = c.prepare(&format!(
                "SELECT agent_id, value FROM agent_tag WHERE key = ?1{condition} ORDER BY agent_id"
            ))?;
            let params = rusqlite::params_from_iter(std::iter::once(rusqlite::types::Value::from(key)).chain(groups));
            stmt.query_map(params, |r| Ok((r.get(0)?, r.get(1)?)))?.collect()
        })
        .await
    }
}

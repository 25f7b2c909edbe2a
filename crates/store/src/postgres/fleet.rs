//! The fleet on PostgreSQL: enrollment tokens, agents, and inventory rows as JSONB.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use serde_json::Value;
use toolgate_domain::StoreError;
use toolgate_domain::fleet::agent::{AGENT_SECRET_PREFIX, AgentAuth, InventoryStatus, new_agent_id};
use toolgate_domain::fleet::wire::InventoryReport;
use toolgate_domain::fleet::{AgentStatus, AgentSummary, EnrollRefusal, EnrollmentToken, HostFacts};
use toolgate_domain::groups::Reach;
use toolgate_domain::secrets::{hash_secret, new_secret};

use super::confinement::{reach_agents, reach_param};
use super::json_rows::{chunk, page};
use super::{Pg, PostgresStore, execute, pg, relaxed, row, rows};
use crate::changes::Change;
use crate::filtered::filtered_page;
use crate::rules::{agent_auth, enroll_refusal, new_enrollment_token};
use crate::{ColumnCondition, FleetStore, RowFilter, RowPage, RowSource};

type Result<T> = std::result::Result<T, StoreError>;

fn enrollment_row(r: &tokio_postgres::Row) -> Pg<EnrollmentToken> {
    Ok(EnrollmentToken {
        id: r.try_get(0)?,
        created_at_ms: r.try_get(1)?,
        expires_at_ms: r.try_get(2)?,
        uses_allowed: r.try_get(3)?,
        uses: r.try_get(4)?,
    })
}

#[async_trait]
impl FleetStore for PostgresStore {
    async fn create_enrollment_token(
        &self,
        expires_at_ms: i64,
        uses_allowed: i64,
        now_ms: i64,
    ) -> Result<(EnrollmentToken, String)> {
        let (token, secret) = new_enrollment_token(expires_at_ms, uses_allowed, now_ms);
        pg(async {
            execute(
                &*self.conn().await?,
                "INSERT INTO enrollment_token (id, secret_hash, created_at_ms, expires_at_ms, uses_allowed) VALUES ($1, $2, $3, $4, $5)",
                &[&token.id, &hash_secret(&secret), &now_ms, &expires_at_ms, &uses_allowed],
            )
            .await
        })
        .await?;
        Ok((token, secret))
    }

    async fn enrollment_tokens(&self) -> Result<Vec<EnrollmentToken>> {
        pg(async {
            let c = self.conn().await?;
            rows(
                &*c,
                "SELECT id, created_at_ms, expires_at_ms, uses_allowed, uses FROM enrollment_token ORDER BY created_at_ms DESC, id",
                &[],
            )
            .await?
            .iter()
            .map(enrollment_row)
            .collect()
        })
        .await
    }

    async fn enroll(&self, secret: &str, now_ms: i64) -> Result<std::result::Result<(String, String), EnrollRefusal>> {
        let hash = hash_secret(secret);
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            // The token's row is locked: two replicas enrolling with its last use cannot both win.
            let found = row(
                &tx,
                "SELECT id, created_at_ms, expires_at_ms, uses_allowed, uses FROM enrollment_token WHERE secret_hash = $1 FOR UPDATE",
                &[&hash],
            )
            .await?;
            let Some(token) = found.as_ref().map(enrollment_row).transpose()? else { return Ok(Err(EnrollRefusal::Unknown)) };
            if let Some(refusal) = enroll_refusal(&token, now_ms) {
                return Ok(Err(refusal));
            }
            execute(&tx, "UPDATE enrollment_token SET uses = uses + 1 WHERE id = $1", &[&token.id]).await?;
            let (agent_id, credential) = (new_agent_id(), new_secret(AGENT_SECRET_PREFIX));
            execute(
                &tx,
                "INSERT INTO agent (agent_id, credential_hash, enrolled_at_ms, enrolled_with) VALUES ($1, $2, $3, $4)",
                &[&agent_id, &hash_secret(&credential), &now_ms, &token.id],
            )
            .await?;
            super::groups::refresh_agent_rules(&tx, &agent_id).await?;
            self.notify(&tx, Change::AgentEnrolled(agent_id.clone())).await?;
            tx.commit().await?;
            Ok(Ok((agent_id, credential)))
        })
        .await
    }

    async fn authenticate_agent(&self, agent_id: &str, credential: &str) -> Result<AgentAuth> {
        let hash = hash_secret(credential);
        pg(async {
            let c = self.conn().await?;
            let found =
                row(&*c, "SELECT credential_hash, revoked_at_ms FROM agent WHERE agent_id = $1", &[&agent_id]).await?;
            let stored = found.map(|r| Ok::<_, tokio_postgres::Error>((r.try_get(0)?, r.try_get(1)?))).transpose()?;
            Ok(agent_auth(stored, &hash))
        })
        .await
    }

    async fn agents(&self) -> Result<Vec<AgentSummary>> {
        pg(self.agents_where(None)).await
    }

    async fn agent(&self, agent_id: &str) -> Result<Option<AgentSummary>> {
        Ok(pg(self.agents_where(Some(agent_id))).await?.pop())
    }

    async fn save_facts(&self, agent_id: &str, facts: &HostFacts, collected_at_ms: i64) -> Result<()> {
        let facts = serde_json::to_string(facts).map_err(StoreError::backend)?;
        // Reports are sent again on the next connection or schedule: no wait for the disk.
        pg(async {
            let mut c = self.conn().await?;
            let tx = relaxed(&mut c).await?;
            execute(
                &tx,
                "UPDATE agent SET facts = $2, facts_at_ms = $3 WHERE agent_id = $1",
                &[&agent_id, &facts, &collected_at_ms],
            )
            .await?;
            // Rules read facts: membership follows them in the same commit.
            super::groups::refresh_agent_rules(&tx, agent_id).await?;
            self.notify(&tx, Change::AgentFacts(agent_id.to_string())).await?;
            Ok(tx.commit().await?)
        })
        .await
    }

    async fn save_last_seen(&self, seen: &[(String, i64)]) -> Result<()> {
        let (ids, at): (Vec<&str>, Vec<i64>) = seen.iter().map(|(id, at)| (id.as_str(), *at)).unzip();
        // When an agent was last seen is a hint, written again at the next sweep.
        pg(async {
            let mut c = self.conn().await?;
            let tx = relaxed(&mut c).await?;
            execute(
                &tx,
                "UPDATE agent SET last_seen_ms = s.at FROM unnest($1::text[], $2::bigint[]) AS s(id, at) WHERE agent.agent_id = s.id",
                &[&ids, &at],
            )
            .await?;
            Ok(tx.commit().await?)
        })
        .await
    }

    async fn agent_connected(&self, agent_id: &str, replica: &str, at_ms: i64) -> Result<()> {
        self.presence(
            "UPDATE agent SET connected_to = $2, last_seen_ms = $3 WHERE agent_id = $1",
            agent_id,
            replica,
            at_ms,
        )
        .await
    }

    async fn agent_disconnected(&self, agent_id: &str, replica: &str, at_ms: i64) -> Result<()> {
        self.presence(
            "UPDATE agent SET connected_to = NULL, last_seen_ms = $3 WHERE agent_id = $1 AND connected_to = $2",
            agent_id,
            replica,
            at_ms,
        )
        .await
    }

    async fn connected_elsewhere(&self, replica: &str, since_ms: i64) -> Result<Vec<(String, String, i64)>> {
        pg(async {
            let c = self.conn().await?;
            rows(
                &*c,
                "SELECT agent_id, connected_to, last_seen_ms FROM agent
                 WHERE connected_to IS NOT NULL AND connected_to <> $1 AND last_seen_ms >= $2 AND revoked_at_ms IS NULL",
                &[&replica, &since_ms],
            )
            .await?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
            .collect()
        })
        .await
    }

    async fn revoke_agent(&self, agent_id: &str, now_ms: i64) -> Result<bool> {
        pg(self.update_announcing(
            "UPDATE agent SET revoked_at_ms = $2 WHERE agent_id = $1 AND revoked_at_ms IS NULL",
            &[&agent_id, &now_ms],
            Change::AgentRevoked(agent_id.to_string()),
        ))
        .await
    }

    async fn revoked_since(&self, since_ms: i64) -> Result<Vec<String>> {
        pg(async {
            let c = self.conn().await?;
            rows(&*c, "SELECT agent_id FROM agent WHERE revoked_at_ms >= $1", &[&since_ms])
                .await?
                .iter()
                .map(|r| Ok(r.try_get(0)?))
                .collect()
        })
        .await
    }

    async fn save_inventory(&self, agent_id: &str, report: InventoryReport, received_at_ms: i64) -> Result<()> {
        let found: Vec<Value> = report.rows.into_iter().map(Value::Object).collect();
        let row_count = found.len() as i64;
        pg(async {
            let mut c = self.conn().await?;
            let tx = relaxed(&mut c).await?;
            execute(&tx, "DELETE FROM inventory_row WHERE table_name = $1 AND agent_id = $2", &[&report.table, &agent_id]).await?;
            // One statement for every row, in the order reported.
            execute(
                &tx,
                "INSERT INTO inventory_row (table_name, agent_id, row) SELECT $1, $2, r FROM unnest($3::jsonb[]) WITH ORDINALITY AS u(r, n) ORDER BY n",
                &[&report.table, &agent_id, &found],
            )
            .await?;
            execute(
                &tx,
                "INSERT INTO inventory_table (agent_id, table_name, collected_at_ms, received_at_ms, available, reason, row_count)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (agent_id, table_name) DO UPDATE SET collected_at_ms = excluded.collected_at_ms,
                   received_at_ms = excluded.received_at_ms, available = excluded.available, reason = excluded.reason,
                   row_count = excluded.row_count",
                &[&agent_id, &report.table, &report.collected_at_ms, &received_at_ms, &report.available, &report.reason, &row_count],
            )
            .await?;
            Ok(tx.commit().await?)
        })
        .await
    }

    async fn inventory_status(&self, agent_id: &str) -> Result<Vec<InventoryStatus>> {
        pg(async {
            let c = self.conn().await?;
            rows(
                &*c,
                "SELECT agent_id, table_name, collected_at_ms, received_at_ms, available, reason, row_count FROM inventory_table
                 WHERE agent_id = $1 ORDER BY table_name",
                &[&agent_id],
            )
            .await?
            .iter()
            .map(|r| {
                Ok(InventoryStatus {
                    agent_id: r.try_get(0)?,
                    table: r.try_get(1)?,
                    collected_at_ms: r.try_get(2)?,
                    received_at_ms: r.try_get(3)?,
                    available: r.try_get(4)?,
                    reason: r.try_get(5)?,
                    rows: r.try_get(6)?,
                })
            })
            .collect()
        })
        .await
    }

    async fn inventory_coverage(&self, reach: &Reach) -> Result<Vec<(String, i64, i64)>> {
        let groups = reach_param(reach);
        pg(async {
            let c = self.conn().await?;
            let confined = if groups.is_some() { format!("WHERE agent_id IN ({})", reach_agents(1)) } else { String::new() };
            let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                groups.iter().map(|g| g as &(dyn tokio_postgres::types::ToSql + Sync)).collect();
            rows(
                &*c,
                &format!("SELECT table_name, count(*), count(*) FILTER (WHERE NOT available) FROM inventory_table {confined} GROUP BY table_name ORDER BY table_name"),
                &params,
            )
            .await?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
            .collect()
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
        let Some(filter) = filter else {
            return pg(async { page(&*self.conn().await?, source, conditions, offset, limit).await }).await;
        };
        // A connection per chunk, given back before the filter runs.
        let read_after = |after| pg(async move { chunk(&*self.conn().await?, source, conditions, after).await });
        filtered_page(read_after, filter, offset, limit).await
    }

    async fn all_tags(&self, reach: &Reach) -> Result<Vec<(String, String, String)>> {
        pg(async {
            let groups = reach_param(reach);
            let values: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                groups.iter().map(|g| g as &(dyn tokio_postgres::types::ToSql + Sync)).collect();
            let sql = format!(
                "SELECT agent_id, key, value FROM agent_tag WHERE TRUE{} ORDER BY agent_id, key",
                super::experience::confined("agent_id", &groups, 1)
            );
            rows(&*self.conn().await?, &sql, &values)
                .await?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
                .collect()
        })
        .await
    }

    async fn tag_values(&self, reach: &Reach, key: &str) -> Result<Vec<(String, String)>> {
        pg(async {
            let groups = reach_param(reach);
            let mut values: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&key];
            values.extend(groups.iter().map(|g| g as &(dyn tokio_postgres::types::ToSql + Sync)));
            let sql = format!(
                "SELECT agent_id, value FROM agent_tag WHERE key = $1{} ORDER BY agent_id",
                super::experience::confined("agent_id", &groups, 2)
            );
            rows(&*self.conn().await?, &sql, &values)
                .await?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                .collect()
        })
        .await
    }
}

impl PostgresStore {
    /// Every agent, or the one named.
    async fn agents_where(&self, agent_id: Option<&str>) -> Pg<Vec<AgentSummary>> {
        let c = self.conn().await?;
        let found = rows(
            &*c,
            "SELECT agent_id, enrolled_at_ms, last_seen_ms, revoked_at_ms, facts, facts_at_ms FROM agent
             WHERE $1::text IS NULL OR agent_id = $1 ORDER BY agent_id",
            &[&agent_id],
        )
        .await?;
        found
            .iter()
            .map(|r| {
                let revoked_at_ms: Option<i64> = r.try_get(3)?;
                let facts: Option<String> = r.try_get(4)?;
                Ok(AgentSummary {
                    agent_id: r.try_get(0)?,
                    status: if revoked_at_ms.is_some() { AgentStatus::Revoked } else { AgentStatus::Offline },
                    enrolled_at_ms: r.try_get(1)?,
                    last_seen_ms: r.try_get(2)?,
                    revoked_at_ms,
                    facts: facts.map(|f| serde_json::from_str(&f)).transpose()?,
                    facts_at_ms: r.try_get(5)?,
                })
            })
            .collect()
    }

    /// Writes where an agent is connected; a hint rewritten on every connection, so its
    /// commit does not wait for the disk.
    async fn presence(&self, sql: &str, agent_id: &str, replica: &str, at_ms: i64) -> Result<()> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = relaxed(&mut c).await?;
            execute(&tx, sql, &[&agent_id, &replica, &at_ms]).await?;
            Ok(tx.commit().await?)
        })
        .await
    }
}

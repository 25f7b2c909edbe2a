//! Executions, responses, quarantine and compliance on PostgreSQL. An agent's result is
//! taken once: its target row is locked while the result is stored, so the same upload
//! reaching two replicas stores one copy (the other answers AlreadyFinal).

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use toolgate_domain::StoreError;
use toolgate_domain::fleet::compliance::RuleResult;
use toolgate_domain::fleet::instruction::{ExecutionState, TargetStatus};
use toolgate_domain::fleet::wire::{RunOrder, RunResult, RunStep};
use toolgate_domain::groups::Reach;

use super::by_definition;
use super::confinement::{readable, reader_groups};
use crate::{DefinitionPage, DefinitionQuery, GroupOrder, Reader, RowsOf};

use super::executions::{HEADER_COLUMNS, create, executions_filter, header, headers, target_row, targets};
use super::{Pg, PostgresStore, execute, pg, relaxed, row, rows};
use super::{compliance, responses};
use crate::ResponsePage;
use crate::changes::Change;
use crate::fleet_work::{
    Cancelled, Created, ExecutionHeader, Group, NewExecution, QuarantineRecord, ResponseQuery, SILENT_PAST_DEADLINE,
    StepRecord, Taken, TargetRecord, UNRELEASED_AT_DEADLINE, WorkStore, enforcement_from, enforcement_text,
};
use toolgate_domain::fleet::wire::QuarantineEnforcement;

type Result<T> = std::result::Result<T, StoreError>;

#[async_trait]
impl WorkStore for PostgresStore {
    async fn create_execution(&self, e: NewExecution) -> Result<Created> {
        let steps = serde_json::to_string(&e.steps).map_err(StoreError::backend)?;
        let rollout = e.rollout.map(|r| serde_json::to_string(&r)).transpose().map_err(StoreError::backend)?;
        pg(create(self, &e, &steps, rollout.as_deref())).await
    }

    async fn undelivered(&self, execution_id: &str, now_ms: i64) -> Result<Option<(RunOrder, Vec<String>)>> {
        pg(async {
            let c = self.conn().await?;
            let found = row(
                &*c,
                "SELECT execution_id, deadline_ms, steps FROM execution
                 WHERE execution_id = $1 AND cancelled_at_ms IS NULL AND deadline_ms > $2",
                &[&execution_id, &now_ms],
            )
            .await?;
            let Some(r) = found else { return Ok(None) };
            let steps: String = r.try_get(2)?;
            let order = RunOrder {
                execution_id: r.try_get(0)?,
                deadline_ms: r.try_get(1)?,
                steps: serde_json::from_str(&steps)?,
            };
            let targets = rows(
                &*c,
                "SELECT t.agent_id FROM execution_target t JOIN execution e ON e.execution_id = t.execution_id
                 WHERE t.execution_id = $1 AND t.status = 'pending' AND t.wave <= e.released_wave ORDER BY t.agent_id",
                &[&execution_id],
            )
            .await?
            .iter()
            .map(|r| Ok(r.try_get(0)?))
            .collect::<Pg<_>>()?;
            Ok(Some((order, targets)))
        })
        .await
    }

    async fn due_for(&self, agent_id: &str, now_ms: i64) -> Result<Vec<RunOrder>> {
        pg(async {
            let c = self.conn().await?;
            let found = rows(
                &*c,
                "SELECT e.execution_id, e.deadline_ms, e.steps FROM execution_target t JOIN execution e ON e.execution_id = t.execution_id
                 WHERE t.agent_id = $1 AND t.status IN ('pending', 'running') AND e.deadline_ms > $2 AND e.cancelled_at_ms IS NULL
                   AND t.wave <= e.released_wave
                 ORDER BY e.created_at_ms",
                &[&agent_id, &now_ms],
            )
            .await?;
            found
                .iter()
                .map(|r| {
                    let steps: String = r.try_get(2)?;
                    let steps: Vec<RunStep> = serde_json::from_str(&steps)?;
                    Ok(RunOrder { execution_id: r.try_get(0)?, deadline_ms: r.try_get(1)?, steps })
                })
                .collect()
        })
        .await
    }

    async fn mark_delivered(&self, execution_id: &str, agent_ids: Vec<String>, now_ms: i64) -> Result<()> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = relaxed(&mut c).await?;
            execute(
                &tx,
                "UPDATE execution_target SET status = 'running', updated_at_ms = $3
                 WHERE execution_id = $1 AND agent_id = ANY($2) AND status = 'pending'",
                &[&execution_id, &agent_ids, &now_ms],
            )
            .await?;
            Ok(tx.commit().await?)
        })
        .await
    }

    async fn refuse(&self, execution_id: &str, agent_ids: Vec<String>, reason: &str, now_ms: i64) -> Result<()> {
        pg(async {
            let c = self.conn().await?;
            execute(
                &*c,
                "UPDATE execution_target SET status = 'refused', error = $3, updated_at_ms = $4
                 WHERE execution_id = $1 AND agent_id = ANY($2) AND status IN ('pending', 'running')",
                &[&execution_id, &agent_ids, &reason, &now_ms],
            )
            .await?;
            Ok(())
        })
        .await
    }

    async fn save_result(&self, agent_id: &str, result: RunResult, now_ms: i64) -> Result<Taken> {
        pg(responses::store_result(self, agent_id, &result, now_ms)).await
    }

    async fn expire(&self, now_ms: i64) -> Result<u64> {
        pg(async {
            let c = self.conn().await?;
            // Waves never released first: they were never due, so they are not offline.
            let skipped = execute(
                &*c,
                "UPDATE execution_target t SET status = 'skipped', error = $2, updated_at_ms = $1 FROM execution e
                 WHERE e.execution_id = t.execution_id AND e.deadline_ms <= $1 AND t.status = 'pending' AND t.wave > e.released_wave",
                &[&now_ms, &UNRELEASED_AT_DEADLINE],
            )
            .await?;
            let expired = execute(
                &*c,
                "UPDATE execution_target SET status = CASE status WHEN 'pending' THEN 'offline' ELSE 'timed_out' END,
                        error = CASE status WHEN 'running' THEN coalesce(error, $2) ELSE error END, updated_at_ms = $1
                 WHERE status IN ('pending', 'running') AND execution_id IN (SELECT execution_id FROM execution WHERE deadline_ms <= $1)",
                &[&now_ms, &SILENT_PAST_DEADLINE],
            )
            .await?;
            Ok(skipped + expired)
        })
        .await
    }

    async fn cancel(&self, execution_id: &str, now_ms: i64) -> Result<Option<Cancelled>> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            let found = execute(
                &tx,
                "UPDATE execution SET cancelled_at_ms = coalesce(cancelled_at_ms, $2) WHERE execution_id = $1",
                &[&execution_id, &now_ms],
            )
            .await?;
            if found == 0 {
                return Ok(None);
            }
            let stopped = execute(
                &tx,
                "UPDATE execution_target SET status = 'cancelled', updated_at_ms = $2 WHERE execution_id = $1 AND status = 'pending'",
                &[&execution_id, &now_ms],
            )
            .await? as i64;
            let targets = targets(&tx, execution_id).await?;
            tx.commit().await?;
            Ok(Some(Cancelled { stopped, targets }))
        })
        .await
    }

    async fn execution(&self, execution_id: &str, reader: Option<&Reader>) -> Result<Option<ExecutionHeader>> {
        let groups = reader_groups(reader);
        pg(async {
            let c = self.conn().await?;
            let (confined, extra) = readable("execution.execution_id", reader, &groups, 2);
            let sql = format!("SELECT {HEADER_COLUMNS} FROM execution WHERE execution_id = $1{confined}");
            let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&execution_id];
            params.extend(extra);
            match row(&*c, &sql, &params).await? {
                Some(r) => Ok(Some(header(&*c, &r).await?)),
                None => Ok(None),
            }
        })
        .await
    }

    async fn targets(&self, execution_id: &str) -> Result<Vec<TargetRecord>> {
        pg(async { targets(&*self.conn().await?, execution_id).await }).await
    }

    async fn targets_page(
        &self,
        execution_id: &str,
        status: Option<TargetStatus>,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<TargetRecord>> {
        let status = status.map(|s| s.as_str());
        pg(async {
            let c = self.conn().await?;
            rows(
                &*c,
                "SELECT agent_id, status, error, updated_at_ms FROM execution_target
                 WHERE execution_id = $1 AND ($2::text IS NULL OR status = $2) ORDER BY agent_id LIMIT $3 OFFSET $4",
                &[&execution_id, &status, &(limit as i64), &(offset as i64)],
            )
            .await?
            .iter()
            .map(target_row)
            .collect()
        })
        .await
    }

    async fn executions(
        &self,
        definition: Option<&str>,
        state: Option<ExecutionState>,
        reader: Option<&Reader>,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<ExecutionHeader>> {
        let (pattern, state) = (definition.map(crate::by_definition::steps_pattern), state.map(ExecutionState::as_str));
        let groups = reader_groups(reader);
        pg(async {
            let c = self.conn().await?;
            let (limit, offset) = (limit as i64, offset as i64);
            let (filter, mut params) = executions_filter(&pattern, &state, reader, &groups);
            let sql = format!(
                "SELECT {HEADER_COLUMNS} FROM execution {filter} ORDER BY created_at_ms DESC, execution_id LIMIT ${} OFFSET ${}",
                params.len() + 1,
                params.len() + 2
            );
            params.extend([&limit as &(dyn tokio_postgres::types::ToSql + Sync), &offset]);
            let found = rows(&*c, &sql, &params).await?;
            headers(&*c, found).await
        })
        .await
    }

    async fn count_executions(
        &self,
        definition: Option<&str>,
        state: Option<ExecutionState>,
        reader: Option<&Reader>,
    ) -> Result<usize> {
        let (pattern, state) = (definition.map(crate::by_definition::steps_pattern), state.map(ExecutionState::as_str));
        let groups = reader_groups(reader);
        pg(async {
            let c = self.conn().await?;
            let (filter, params) = executions_filter(&pattern, &state, reader, &groups);
            let sql = format!("SELECT COUNT(*) FROM execution {filter}");
            super::count(&*c, &sql, &params).await
        })
        .await
    }

    async fn steps(&self, execution_id: &str) -> Result<Vec<StepRecord>> {
        pg(async {
            let c = self.conn().await?;
            rows(
                &*c,
                "SELECT agent_id, step, status, error, row_count FROM execution_step WHERE execution_id = $1 ORDER BY agent_id, step",
                &[&execution_id],
            )
            .await?
            .iter()
            .map(|r| {
                Ok(StepRecord {
                    agent_id: r.try_get(0)?,
                    step: r.try_get::<_, i64>(1)? as usize,
                    status: r.try_get(2)?,
                    error: r.try_get(3)?,
                    row_count: r.try_get(4)?,
                })
            })
            .collect()
        })
        .await
    }

    async fn responses(&self, q: ResponseQuery) -> Result<ResponsePage> {
        pg(responses::page(self, q)).await
    }

    async fn definition_responses(&self, query: DefinitionQuery) -> Result<DefinitionPage> {
        pg(by_definition::page(self, query)).await
    }

    async fn aggregate(
        &self,
        rows: RowsOf<'_>,
        reader: Option<&Reader>,
        group_by: &str,
        of: Option<&str>,
        order: GroupOrder,
        limit: usize,
    ) -> Result<Vec<Group>> {
        let grouping = responses::Grouping { rows, reader, group_by, of, order, limit };
        pg(responses::aggregate(self, grouping)).await
    }

    async fn set_quarantine(&self, agent_id: &str, wanted: bool, reason: Option<&str>) -> Result<()> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            execute(
                &tx,
                "UPDATE agent SET quarantine_wanted = $2, quarantine_reason = $3 WHERE agent_id = $1",
                &[&agent_id, &wanted, &reason],
            )
            .await?;
            self.notify(&tx, Change::Quarantine(agent_id.to_string())).await?;
            Ok(tx.commit().await?)
        })
        .await
    }

    async fn quarantine_reported(
        &self,
        agent_id: &str,
        quarantined: bool,
        enforcement: Option<&QuarantineEnforcement>,
    ) -> Result<()> {
        let enforcement = enforcement_text(enforcement);
        pg(async {
            let c = self.conn().await?;
            let sql = "UPDATE agent SET quarantine_reported = $2, quarantine_enforcement = coalesce($3, quarantine_enforcement) \
                       WHERE agent_id = $1";
            execute(&*c, sql, &[&agent_id, &quarantined, &enforcement]).await.map(drop)
        })
        .await
    }

    async fn quarantine_enforcement(
        &self,
        agent_id: &str,
        reach: &Reach,
    ) -> Result<Option<Option<QuarantineEnforcement>>> {
        let groups = super::confinement::reach_param(reach);
        pg(async {
            let within = match &groups {
                Some(_) => format!(" AND agent_id IN ({})", super::confinement::reach_agents(2)),
                None => String::new(),
            };
            let sql = format!("SELECT quarantine_enforcement FROM agent WHERE agent_id = $1{within}");
            let mut values: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&agent_id];
            if let Some(groups) = &groups {
                values.push(groups);
            }
            let found = row(&*self.conn().await?, &sql, &values).await?;
            let text: Option<Option<String>> = found.map(|r| r.try_get(0)).transpose()?;
            Ok(text.map(enforcement_from))
        })
        .await
    }

    async fn quarantines(&self) -> Result<Vec<QuarantineRecord>> {
        pg(async {
            let c = self.conn().await?;
            rows(
                &*c,
                "SELECT agent_id, quarantine_wanted, quarantine_reason, quarantine_reported, quarantine_enforcement FROM agent
                 WHERE quarantine_wanted OR quarantine_reported IS NOT NULL ORDER BY agent_id",
                &[],
            )
            .await?
            .iter()
            .map(|r| {
                Ok(QuarantineRecord {
                    agent_id: r.try_get(0)?,
                    wanted: r.try_get(1)?,
                    reason: r.try_get(2)?,
                    reported: r.try_get(3)?,
                    enforcement: enforcement_from(r.try_get(4)?),
                })
            })
            .collect()
        })
        .await
    }

    async fn save_compliance(&self, agent_id: &str, results: Vec<RuleResult>, evaluated_at_ms: i64) -> Result<()> {
        pg(compliance::save(self, agent_id, &results, evaluated_at_ms)).await
    }

    async fn compliance(&self, rule_id: Option<&str>, reach: &Reach) -> Result<Vec<(String, RuleResult, i64)>> {
        pg(compliance::results(self, rule_id, reach)).await
    }
}

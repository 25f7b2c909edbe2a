//! Executions, responses, quarantine and compliance in SQLite.
//!
//! Results and compliance outcomes commit without an fsync (see `without_fsync`): a result
//! lost to a power cut leaves its target unfinished, so the run is sent again when the agent
//! reconnects and the agent answers from its journal; a lost compliance row comes back with
//! the next evaluation. Executions themselves are committed with the full fsync before their
//! id is returned.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use toolgate_domain::StoreError;
use toolgate_domain::fleet::compliance::{ComplianceStatus, RuleResult};
use toolgate_domain::fleet::instruction::{ExecutionState, TargetStatus};
use toolgate_domain::fleet::wire::{RunOrder, RunResult};
use toolgate_domain::groups::Reach;

use super::by_definition;
use super::confinement::readable;
use crate::{DefinitionPage, DefinitionQuery, GroupOrder, Reader, RowsOf};

use super::executions::{
    HEADER_COLUMNS, create, executions_filter, header, steps_of, target_row, targets, undelivered,
};
use super::responses::{responses, store_result};
use super::{SqliteStore, without_fsync};
use crate::ResponsePage;
use crate::fleet_work::{
    Cancelled, Created, ExecutionHeader, Group, NewExecution, QuarantineRecord, ResponseQuery, SILENT_PAST_DEADLINE,
    StepRecord, Taken, TargetRecord, UNRELEASED_AT_DEADLINE, WorkStore, enforcement_from, enforcement_text,
};
use toolgate_domain::fleet::wire::QuarantineEnforcement;

type Result<T> = std::result::Result<T, StoreError>;

#[async_trait]
impl WorkStore for SqliteStore {
    async fn create_execution(&self, execution: NewExecution) -> Result<Created> {
        self.run(move |c| create(c, &execution)).await
    }

    async fn undelivered(&self, execution_id: &str, now_ms: i64) -> Result<Option<(RunOrder, Vec<String>)>> {
        let execution_id = execution_id.to_string();
        self.run(move |c| undelivered(c, &execution_id, now_ms)).await
    }

    async fn due_for(&self, agent_id: &str, now_ms: i64) -> Result<Vec<RunOrder>> {
        let agent_id = agent_id.to_string();
        self.run(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT e.execution_id, e.deadline_ms, e.steps FROM execution_target t JOIN execution e ON e.execution_id = t.execution_id \
                 WHERE t.agent_id = ?1 AND t.status IN ('pending', 'running') AND e.deadline_ms > ?2 AND e.cancelled_at_ms IS NULL \
                 AND t.wave <= e.released_wave \
                 ORDER BY e.created_at_ms",
            )?;
            stmt.query_map(params![agent_id, now_ms], |r| {
                Ok(RunOrder { execution_id: r.get(0)?, deadline_ms: r.get(1)?, steps: steps_of(&r.get::<_, String>(2)?)? })
            })?
            .collect()
        })
        .await
    }

    async fn mark_delivered(&self, execution_id: &str, agent_ids: Vec<String>, now_ms: i64) -> Result<()> {
        let execution_id = execution_id.to_string();
        self.run(move |c| {
            without_fsync(c, |c| {
                let tx = c.transaction()?;
                {
                    let mut update = tx.prepare_cached(
                        "UPDATE execution_target SET status = 'running', updated_at_ms = ?3 WHERE execution_id = ?1 AND agent_id = ?2 AND status = 'pending'",
                    )?;
                    for agent_id in &agent_ids {
                        update.execute(params![execution_id, agent_id, now_ms])?;
                    }
                }
                tx.commit()
            })
        })
        .await
    }

    async fn refuse(&self, execution_id: &str, agent_ids: Vec<String>, reason: &str, now_ms: i64) -> Result<()> {
        let (execution_id, reason) = (execution_id.to_string(), reason.to_string());
        self.run(move |c| {
            let tx = c.transaction()?;
            {
                let mut update = tx.prepare_cached(
                    "UPDATE execution_target SET status = 'refused', error = ?3, updated_at_ms = ?4 \
                     WHERE execution_id = ?1 AND agent_id = ?2 AND status IN ('pending', 'running')",
                )?;
                for agent_id in &agent_ids {
                    update.execute(params![execution_id, agent_id, reason, now_ms])?;
                }
            }
            tx.commit()
        })
        .await
    }

    async fn save_result(&self, agent_id: &str, result: RunResult, now_ms: i64) -> Result<Taken> {
        let agent_id = agent_id.to_string();
        self.run(move |c| without_fsync(c, |c| store_result(c, &agent_id, &result, now_ms))).await
    }

    async fn expire(&self, now_ms: i64) -> Result<u64> {
        self.run(move |c| {
            let tx = c.transaction()?;
            // Waves never released first: they were never due, so they are not offline.
            let mut changed = tx.execute(
                "UPDATE execution_target SET status = 'skipped', error = ?2, updated_at_ms = ?1 WHERE status = 'pending' \
                 AND wave > (SELECT e.released_wave FROM execution e WHERE e.execution_id = execution_target.execution_id AND e.deadline_ms <= ?1)",
                params![now_ms, UNRELEASED_AT_DEADLINE],
            )?;
            for (from, to, error) in [("pending", "offline", None), ("running", "timed_out", Some(SILENT_PAST_DEADLINE))] {
                changed += tx.execute(
                    &format!(
                        "UPDATE execution_target SET status = '{to}', error = coalesce(error, ?2), updated_at_ms = ?1 \
                         WHERE status = '{from}' AND execution_id IN (SELECT execution_id FROM execution WHERE deadline_ms <= ?1)"
                    ),
                    params![now_ms, error],
                )?;
            }
            tx.commit()?;
            Ok(changed as u64)
        })
        .await
    }

    async fn cancel(&self, execution_id: &str, now_ms: i64) -> Result<Option<Cancelled>> {
        let execution_id = execution_id.to_string();
        self.run(move |c| {
            let tx = c.transaction()?;
            let found = tx.execute(
                "UPDATE execution SET cancelled_at_ms = coalesce(cancelled_at_ms, ?2) WHERE execution_id = ?1",
                params![execution_id, now_ms],
            )?;
            if found == 0 {
                return Ok(None);
            }
            let stopped = tx.execute(
                "UPDATE execution_target SET status = 'cancelled', updated_at_ms = ?2 WHERE execution_id = ?1 AND status = 'pending'",
                params![execution_id, now_ms],
            )? as i64;
            let targets = targets(&tx, &execution_id)?;
            tx.commit()?;
            Ok(Some(Cancelled { stopped, targets }))
        })
        .await
    }

    async fn execution(&self, execution_id: &str, reader: Option<&Reader>) -> Result<Option<ExecutionHeader>> {
        let (readable, mut values) = readable("execution.execution_id", reader);
        values.insert(0, execution_id.to_string().into());
        self.run(move |c| {
            let sql = format!("SELECT {HEADER_COLUMNS} FROM execution WHERE execution_id = ?{readable}");
            let mut stmt = c.prepare_cached(&sql)?;
            stmt.query_row(rusqlite::params_from_iter(values), |r| header(c, r)).optional()
        })
        .await
    }

    async fn targets(&self, execution_id: &str) -> Result<Vec<TargetRecord>> {
        let execution_id = execution_id.to_string();
        self.run(move |c| targets(c, &execution_id)).await
    }

    async fn targets_page(
        &self,
        execution_id: &str,
        status: Option<TargetStatus>,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<TargetRecord>> {
        let (execution_id, status) = (execution_id.to_string(), status.map(|s| s.as_str()));
        self.run(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT agent_id, status, error, updated_at_ms FROM execution_target \
                 WHERE execution_id = ?1 AND (?2 IS NULL OR status = ?2) ORDER BY agent_id LIMIT ?3 OFFSET ?4",
            )?;
            stmt.query_map(params![execution_id, status, limit as i64, offset as i64], target_row)?.collect()
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
        let (filter, mut values) = executions_filter(definition, state, reader);
        values.extend([(limit as i64).into(), (offset as i64).into()]);
        self.run(move |c| {
            let sql = format!(
                "SELECT {HEADER_COLUMNS} FROM execution {filter} ORDER BY created_at_ms DESC, execution_id LIMIT ? OFFSET ?"
            );
            let mut stmt = c.prepare_cached(&sql)?;
            stmt.query_map(rusqlite::params_from_iter(values), |r| header(c, r))?.collect()
        })
        .await
    }

    async fn count_executions(
        &self,
        definition: Option<&str>,
        state: Option<ExecutionState>,
        reader: Option<&Reader>,
    ) -> Result<usize> {
        let (filter, values) = executions_filter(definition, state, reader);
        self.run(move |c| {
            let sql = format!("SELECT COUNT(*) FROM execution {filter}");
            let counted: i64 = c.prepare_cached(&sql)?.query_row(rusqlite::params_from_iter(values), |r| r.get(0))?;
            Ok(counted.max(0) as usize)
        })
        .await
    }

    async fn steps(&self, execution_id: &str) -> Result<Vec<StepRecord>> {
        let execution_id = execution_id.to_string();
        self.run(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT agent_id, step, status, error, row_count FROM execution_step WHERE execution_id = ?1 ORDER BY agent_id, step",
            )?;
            stmt.query_map(params![execution_id], |r| {
                Ok(StepRecord {
                    agent_id: r.get(0)?,
                    step: r.get::<_, i64>(1)? as usize,
                    status: r.get(2)?,
                    error: r.get(3)?,
                    row_count: r.get(4)?,
                })
            })?
            .collect()
        })
        .await
    }

    async fn responses(&self, query: ResponseQuery) -> Result<ResponsePage> {
        self.run(move |c| responses(c, &query)).await
    }

    async fn definition_responses(&self, query: DefinitionQuery) -> Result<DefinitionPage> {
        self.run(move |c| by_definition::page(c, &query)).await
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
        let (group_by, of) = (group_by.to_string(), of.map(str::to_string));
        let (source, mut values) = by_definition::rows_of(rows);
        let (readable, confined) = readable("response.execution_id", reader);
        values.extend(confined);
        values.push((limit as i64).into());
        let source = format!("{source}{readable}");
        self.run(move |c| super::responses::aggregate(c, &group_by, of.as_deref(), order, &source, values)).await
    }

    async fn set_quarantine(&self, agent_id: &str, wanted: bool, reason: Option<&str>) -> Result<()> {
        let (agent_id, reason) = (agent_id.to_string(), reason.map(str::to_string));
        self.run(move |c| {
            c.execute(
                "UPDATE agent SET quarantine_wanted = ?2, quarantine_reason = ?3 WHERE agent_id = ?1",
                params![agent_id, wanted, reason],
            )
        })
        .await?;
        Ok(())
    }

    async fn quarantine_reported(
        &self,
        agent_id: &str,
        quarantined: bool,
        enforcement: Option<&QuarantineEnforcement>,
    ) -> Result<()> {
        let (agent_id, enforcement) = (agent_id.to_string(), enforcement_text(enforcement));
        self.run(move |c| {
            c.execute(
                "UPDATE agent SET quarantine_reported = ?2, quarantine_enforcement = coalesce(?3, quarantine_enforcement) \
                 WHERE agent_id = ?1",
                params![agent_id, quarantined, enforcement],
            )
        })
        .await?;
        Ok(())
    }

    async fn quarantine_enforcement(
        &self,
        agent_id: &str,
        reach: &Reach,
    ) -> Result<Option<Option<QuarantineEnforcement>>> {
        let (agent_id, groups) = (agent_id.to_string(), super::confinement::reach_param(reach));
        let text: Option<Option<String>> = self
            .run(move |c| {
                let within = match &groups {
                    Some(_) => format!(" AND agent_id IN ({})", super::confinement::reach_agents("?2")),
                    None => String::new(),
                };
                let sql = format!("SELECT quarantine_enforcement FROM agent WHERE agent_id = ?1{within}");
                let mut values: Vec<rusqlite::types::Value> = vec![agent_id.into()];
                values.extend(groups.map(Into::into));
                c.query_row(&sql, rusqlite::params_from_iter(values), |r| r.get(0)).optional()
            })
            .await?;
        Ok(text.map(enforcement_from))
    }

    async fn quarantines(&self) -> Result<Vec<QuarantineRecord>> {
        self.run(|c| {
            let mut stmt = c.prepare(
                "SELECT agent_id, quarantine_wanted, quarantine_reason, quarantine_reported, quarantine_enforcement FROM agent \
                 WHERE quarantine_wanted = 1 OR quarantine_reported IS NOT NULL ORDER BY agent_id",
            )?;
            stmt.query_map([], |r| {
                Ok(QuarantineRecord {
                    agent_id: r.get(0)?,
                    wanted: r.get(1)?,
                    reason: r.get(2)?,
                    reported: r.get(3)?,
                    enforcement: enforcement_from(r.get(4)?),
                })
            })?
            .collect()
        })
        .await
    }

    async fn save_compliance(&self, agent_id: &str, results: Vec<RuleResult>, evaluated_at_ms: i64) -> Result<()> {
        let agent_id = agent_id.to_string();
        self.run(move |c| {
            without_fsync(c, |c| {
                let tx = c.transaction()?;
                tx.execute("DELETE FROM compliance_result WHERE agent_id = ?1", params![agent_id])?;
                {
                    let mut insert = tx.prepare_cached(
                        "INSERT INTO compliance_result (agent_id, rule_id, status, evidence, evaluated_at_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
                    )?;
                    for r in &results {
                        insert.execute(params![agent_id, r.rule_id, r.status.as_str(), r.evidence, evaluated_at_ms])?;
                    }
                }
                tx.commit()
            })
        })
        .await
    }

    async fn compliance(&self, rule_id: Option<&str>, reach: &Reach) -> Result<Vec<(String, RuleResult, i64)>> {
        let (rule_id, groups) = (rule_id.map(str::to_string), super::confinement::reach_param(reach));
        self.run(move |c| {
            let confined = match groups {
                Some(_) => format!("AND agent_id IN ({})", super::confinement::reach_agents("?2")),
                None => "AND ?2 IS NULL".into(),
            };
            let mut stmt = c.prepare_cached(&format!(
                "SELECT agent_id, rule_id, status, evidence, evaluated_at_ms FROM compliance_result \
                 WHERE (?1 IS NULL OR rule_id = ?1) {confined} ORDER BY rule_id, agent_id"
            ))?;
            stmt.query_map(params![rule_id, groups], |r| {
                let status: String = r.get(2)?;
                let status = ComplianceStatus::parse(&status).ok_or(rusqlite::Error::InvalidColumnName(status))?;
                Ok((r.get(0)?, RuleResult { rule_id: r.get(1)?, status, evidence: r.get(3)? }, r.get(4)?))
            })?
            .collect()
        })
        .await
    }
}

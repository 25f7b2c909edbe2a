//! Compliance results on PostgreSQL: what each agent found for each rule, replaced whole per
//! report and read back confined to a reach (as `sqlite/fleet_work.rs` has them).

use toolgate_domain::fleet::compliance::{ComplianceStatus, RuleResult};
use toolgate_domain::groups::Reach;

use super::confinement::{reach_agents, reach_param};
use super::{Pg, PgError, PostgresStore, execute, relaxed, rows};

/// Replaces an agent's results with `results`; reports are sent again, so no wait for the disk.
pub(super) async fn save(
    store: &PostgresStore,
    agent_id: &str,
    results: &[RuleResult],
    evaluated_at_ms: i64,
) -> Pg<()> {
    let rule_ids: Vec<&str> = results.iter().map(|r| r.rule_id.as_str()).collect();
    let statuses: Vec<&str> = results.iter().map(|r| r.status.as_str()).collect();
    let evidence: Vec<&str> = results.iter().map(|r| r.evidence.as_str()).collect();
    let mut c = store.conn().await?;
    let tx = relaxed(&mut c).await?;
    execute(&tx, "DELETE FROM compliance_result WHERE agent_id = $1", &[&agent_id]).await?;
    execute(
        &tx,
        "INSERT INTO compliance_result (agent_id, rule_id, status, evidence, evaluated_at_ms)
         SELECT $1, u.rule_id, u.status, u.evidence, $5 FROM unnest($2::text[], $3::text[], $4::text[]) AS u(rule_id, status, evidence)",
        &[&agent_id, &rule_ids, &statuses, &evidence, &evaluated_at_ms],
    )
    .await?;
    Ok(tx.commit().await?)
}

/// One rule's results (or every rule's) for the agents `reach` covers, confined in the query.
pub(super) async fn results(
    store: &PostgresStore,
    rule_id: Option<&str>,
    reach: &Reach,
) -> Pg<Vec<(String, RuleResult, i64)>> {
    let groups = reach_param(reach);
    let c = store.conn().await?;
    let confined = match groups {
        Some(_) => format!("AND agent_id IN ({})", reach_agents(2)),
        None => "AND $2::text[] IS NULL".into(),
    };
    let sql = format!(
        "SELECT agent_id, rule_id, status, evidence, evaluated_at_ms FROM compliance_result
         WHERE ($1::text IS NULL OR rule_id = $1) {confined} ORDER BY rule_id, agent_id"
    );
    rows(&*c, &sql, &[&rule_id, &groups])
        .await?
        .iter()
        .map(|r| {
            let status: String = r.try_get(2)?;
            let status = ComplianceStatus::parse(&status)
                .ok_or_else(|| PgError::Invalid(format!("a compliance result has the unknown status {status:?}")))?;
            Ok((r.try_get(0)?, RuleResult { rule_id: r.try_get(1)?, status, evidence: r.try_get(3)? }, r.try_get(4)?))
        })
        .collect()
}

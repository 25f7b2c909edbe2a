//! What agents send back, checked against what they were asked before it is stored, as
//! inventory frames are against the declared tables: a result must have one step per step of
//! its order (never none), each row only its action's declared columns; compliance outcomes
//! only the rules in force. A result that does not fit is not dropped (the agent would send
//! it again and again): its target is stored as failed, saying why, with none of its rows.

use std::collections::HashSet;
use std::sync::Arc;

use toolgate_domain::StoreError;
use toolgate_domain::audit::{AuditEvent, AuditOutcome, AuditSink, TargetType};
use toolgate_domain::fleet::compliance::RuleResult;
use toolgate_domain::fleet::instruction::{ActionClass, InstructionSet, StepStatus, TargetStatus, target_status};
use toolgate_domain::fleet::wire::{RunResult, RunStep, StepMode, StepResult};
use toolgate_store::Taken;

use crate::hub::Hub;

/// Why `result` does not answer an order of `steps`, or None when it does.
fn mismatch(steps: &[RunStep], result: &RunResult, actions: Option<&InstructionSet>) -> Option<String> {
    if result.steps.len() != steps.len() {
        return Some(format!("{} step result(s) for an order of {} step(s)", result.steps.len(), steps.len()));
    }
    for (i, (step, answer)) in steps.iter().zip(&result.steps).enumerate() {
        let Some(action) = actions.and_then(|set| set.action(&step.plugin, &step.action)) else { continue };
        // A plan's rows, and a change's whose plan changed (they are its new plan), are plan rows.
        let plan_rows = step.mode == StepMode::Plan || answer.status == StepStatus::PlanChanged;
        let columns = match (plan_rows, &action.plan) {
            (true, Some(plan)) => plan,
            (true, None) => {
                return Some(format!("step {i} ({}.{}) has no plan, yet plan rows came", step.plugin, step.action));
            }
            (false, _) => &action.columns,
        };
        let declared: HashSet<&str> = columns.iter().map(|c| c.name.as_str()).collect();
        let undeclared = answer.rows.iter().flat_map(|row| row.keys()).find(|k| !declared.contains(k.as_str()));
        if let Some(column) = undeclared {
            return Some(format!(
                "step {i} ({}.{}) has a column `{column}` the action does not declare",
                step.plugin, step.action
            ));
        }
    }
    None
}

/// How a run that changed something ended on one agent, for its audit row: the outcome and
/// what each change step did; None when no step of it applied a change (reads and plans).
fn change_outcome(steps: &[RunStep], result: &RunResult) -> Option<(AuditOutcome, String)> {
    let changes: Vec<String> = steps
        .iter()
        .zip(&result.steps)
        .filter(|(step, _)| step.class == ActionClass::Change && step.mode == StepMode::Apply)
        .map(|(step, answer)| {
            let why = answer.error.as_deref().map(|e| format!(" ({})", e.chars().take(200).collect::<String>()));
            format!(
                "{} ({}.{}): {}{}",
                step.definition,
                step.plugin,
                step.action,
                answer.status.as_str(),
                why.unwrap_or_default()
            )
        })
        .collect();
    if changes.is_empty() {
        return None;
    }
    let statuses: Vec<StepStatus> = result.steps.iter().map(|s| s.status).collect();
    let outcome = match target_status(&statuses) {
        TargetStatus::Succeeded => AuditOutcome::Success,
        _ => AuditOutcome::Failure,
    };
    Some((outcome, changes.join("; ")))
}

impl Hub {
    /// Each change's outcome on each agent is recorded to `audit` as it is stored.
    pub fn with_audit(mut self, audit: Arc<dyn AuditSink>) -> Self {
        self.audit = Some(audit);
        self
    }

    /// The instruction set whose action columns results are checked against (without one,
    /// only the shape of a result is).
    pub fn declaring(mut self, actions: &'static InstructionSet) -> Self {
        self.actions = Some(actions);
        self
    }

    pub async fn take_result(&self, agent_id: &str, result: RunResult) -> Result<Taken, StoreError> {
        let execution_id = result.execution_id.clone();
        let Some(header) = self.work.execution(&execution_id, None).await? else {
            tracing::info!(%agent_id, %execution_id, "a result for no known execution was not stored");
            return Ok(Taken::Unknown);
        };
        let result = match mismatch(&header.steps, &result, self.actions) {
            None => result,
            Some(why) => {
                tracing::warn!(%agent_id, %execution_id, "a result that does not answer its order: {why}");
                let error = format!("the agent's result did not answer the order ({why}); none of it was kept");
                let failed = StepResult { status: StepStatus::Failed, error: Some(error), rows: Vec::new() };
                RunResult { execution_id: execution_id.clone(), steps: vec![failed; header.steps.len().max(1)] }
            }
        };
        let result = self.vouched(agent_id, &header.steps, result).await?;
        let outcome = self.audit.is_some().then(|| change_outcome(&header.steps, &result)).flatten();
        let taken = self.work.save_result(agent_id, result, self.clock().now_ms()).await?;
        match taken {
            Taken::Stored => {
                if let (Some(audit), Some((outcome, detail))) = (&self.audit, outcome) {
                    let event = AuditEvent::new(self.clock().now_ms(), "execution.change", outcome)
                        .target(TargetType::Execution, &execution_id)
                        .about_agents([agent_id.to_string()])
                        .detail(detail);
                    audit.record(event);
                }
                // No listener is fine: nobody subscribed.
                drop(self.execution_updates.send(execution_id))
            }
            _ => tracing::info!(%agent_id, %execution_id, "a result was not stored: {taken:?}"),
        }
        Ok(taken)
    }

    /// `result` with the figures of its uploads as the server counted them; a step reporting
    /// an upload the server does not hold is failed, saying so, with none of its rows.
    async fn vouched(&self, agent_id: &str, steps: &[RunStep], mut result: RunResult) -> Result<RunResult, StoreError> {
        let Some(desk) = &self.uploads else { return Ok(result) };
        let execution_id = result.execution_id.clone();
        for (step, answer) in steps.iter().zip(result.steps.iter_mut()) {
            if (step.plugin.as_str(), step.action.as_str()) != crate::uploads::COLLECT_ACTION {
                continue;
            }
            if let Err(why) = desk.vouch(agent_id, &mut answer.rows).await? {
                tracing::warn!(%agent_id, %execution_id, "{why}");
                *answer = StepResult { status: StepStatus::Failed, error: Some(why), rows: Vec::new() };
            }
        }
        Ok(result)
    }

    /// Stores the outcomes of the rules in force; one for a rule that is not (the rules were
    /// reloaded meanwhile, or the agent made it up) is passed over, and logged.
    pub async fn take_compliance(
        &self,
        agent_id: &str,
        results: Vec<RuleResult>,
        at_ms: i64,
    ) -> Result<(), StoreError> {
        let rules = self.rules();
        let known: HashSet<&str> = rules.rules.iter().map(|r| r.id.as_str()).collect();
        let (kept, unknown): (Vec<RuleResult>, Vec<RuleResult>) =
            results.into_iter().partition(|r| known.contains(r.rule_id.as_str()));
        if !unknown.is_empty() {
            let ids: Vec<&str> = unknown.iter().map(|r| r.rule_id.as_str()).take(10).collect();
            tracing::warn!(%agent_id, "compliance outcomes for rules not in force were passed over: {ids:?}");
        }
        self.work.save_compliance(agent_id, kept, at_ms).await
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};
    use toolgate_domain::fleet::instruction::ActionClass;

    use super::*;

    fn step(plugin: &str, action: &str) -> RunStep {
        RunStep {
            definition: "d".into(),
            plugin: plugin.into(),
            action: action.into(),
            class: ActionClass::Read,
            diagnostic: true,
            params: Map::new(),
            timeout_ms: 1,
            secret_names: Vec::new(),
            config: Default::default(),
            secrets: Default::default(),
            mode: Default::default(),
            approved_plan: None,
            approved_plans: Default::default(),
        }
    }

    fn answer(rows: Vec<serde_json::Value>) -> StepResult {
        let rows = rows.into_iter().map(|r| r.as_object().cloned().unwrap()).collect();
        StepResult { status: StepStatus::Succeeded, error: None, rows }
    }

    #[test]
    fn a_result_must_answer_its_order() {
        let manifest: toolgate_domain::fleet::instruction::PluginManifest = serde_json::from_value(json!({
            "plugin": "files", "description": "d", "actions": [{"name": "sha256", "description": "d", "class": "read",
            "columns": [{"name": "path", "type": "text", "description": "d"}, {"name": "sha256", "type": "text", "description": "d"}]}]
        }))
        .unwrap();
        let set: &'static InstructionSet =
            Box::leak(Box::new(InstructionSet { plugins: vec![manifest], definitions: vec![] }));
        let order = [step("files", "sha256")];
        let result = |steps| RunResult { execution_id: "exe-01".into(), steps };
        assert_eq!(
            mismatch(&order, &result(vec![answer(vec![json!({"path": "/f", "sha256": "aa"})])]), Some(set)),
            None
        );
        let empty = mismatch(&order, &result(vec![]), Some(set)).unwrap();
        assert!(empty.contains("0 step result(s) for an order of 1"), "{empty}");
        let extra = mismatch(&order, &result(vec![answer(vec![]), answer(vec![])]), Some(set)).unwrap();
        assert!(extra.contains("2 step result(s)"), "{extra}");
        let column = mismatch(&order, &result(vec![answer(vec![json!({"path": "/f", "password": "x"})])]), Some(set));
        assert!(column.unwrap().contains("column `password`"));
    }
}

//! Starting an execution: its targets resolved, its steps checked, its row stored (once
//! under an idempotency key), and for a bundle an audit row per step.

use serde_json::{Map, Value, json};
use toolgate_domain::approvals::canonical_arguments;
use toolgate_domain::fleet::AgentStatus;
use toolgate_domain::fleet::instruction::new_execution_id;
use toolgate_domain::fleet::rollout::Rollout;
use toolgate_domain::fleet::instruction::{ALLOWED_PATHS_KEY, ActionClass, path_allowed};
use toolgate_domain::fleet::wire::{RunStep, StepMode};
use toolgate_domain::ToolError;
use toolgate_store::{Created, Idempotency, NewExecution};

use super::super::confined::{ensure_known, visible};
use super::super::scopes::chosen_agents;
use super::header;
use crate::instructions::{definition, parameter_problems};
use crate::services::ToolContext;

const DEFAULT_DEADLINE_SECONDS: i64 = 600;

/// `step` as a plan: each agent says what it would change, changing nothing. A plan is a
/// read, so a quarantined agent runs it too.
pub(super) fn as_plan(step: RunStep) -> Result<RunStep, ToolError> {
    if step.class != ActionClass::Change {
        return Err(ToolError::InvalidArguments(format!(
            "`{}` is a read: only a change has a plan (leave plan_only out)",
            step.definition
        )));
    }
    Ok(RunStep { mode: StepMode::Plan, diagnostic: true, ..step })
}

/// A step whose action writes only where its plugin's configuration allows
/// ([`ALLOWED_PATHS_KEY`]) is refused here, before anything is sent, when its `path` lies
/// elsewhere; the agent checks again (with links and `..` resolved).
pub(super) async fn check_allowed_path(ctx: &ToolContext, step: &RunStep) -> Result<(), ToolError> {
    let reads_it = crate::instructions::instructions()
        .action(&step.plugin, &step.action)
        .is_some_and(|a| a.config.iter().any(|c| c.name == ALLOWED_PATHS_KEY));
    let Some(path) = step.params.get("path").and_then(Value::as_str).filter(|_| reads_it) else { return Ok(()) };
    let allowed = ctx.services().plugin_config().get(&step.plugin, ALLOWED_PATHS_KEY).await?;
    let remediation = format!(
        "set_plugin_config plugin {} key {ALLOWED_PATHS_KEY} names the directories it may change (comma-separated, absolute)",
        step.plugin
    );
    match allowed {
        Some(entry) if path_allowed(&entry.value, path) => Ok(()),
        Some(entry) => Err(ToolError::Refused {
            message: format!("`{path}` is outside the allowed paths of plugin {} ({}): nothing was sent", step.plugin, entry.value),
            remediation,
        }),
        None => Err(ToolError::Refused {
            message: format!("plugin {} may change no path: its {ALLOWED_PATHS_KEY} is not set, so nothing was sent", step.plugin),
            remediation,
        }),
    }
}

/// The plans a person approved with the ticket `approval_id` (each agent's digest), and every
/// agent the plan ran on. A change recalled without them does not run: its ticket was minted
/// before plans existed, or its plan could not start.
pub(super) async fn approved_plans(
    ctx: &ToolContext,
    approval_id: &str,
) -> Result<(std::collections::BTreeMap<String, String>, Vec<String>), ToolError> {
    let services = ctx.services();
    let binding = services.approvals().plan_of(approval_id).await?;
    let Some((execution_id, Some(approved))) = binding.map(|b| (b.execution_id, b.approved)) else {
        return Err(ToolError::Refused {
            message: format!("approval {approval_id} carries no approved plan, so the change is not run"),
            remediation: "call again without approval_id: the new ticket's plan is made as it is minted, and a person approves that".into(),
        });
    };
    // The plan is the caller's own execution: read through its confinement like any other.
    let work = &services.repositories().work;
    if work.execution(&execution_id, Some(&super::reader(ctx))).await?.is_none() {
        return Err(ToolError::Refused {
            message: format!("approval {approval_id}'s plan is not yours to read, so the change is not run"),
            remediation: "call again without approval_id, as the principal whose grant covers its targets".into(),
        });
    }
    let targets = work.targets(&execution_id).await?;
    Ok((approved, targets.into_iter().map(|t| t.agent_id).collect()))
}

/// The agents an execution runs on: the listed ones, or the scope's; never none.
pub(crate) async fn resolve_targets(
    ctx: &ToolContext,
    agent_ids: Option<Vec<String>>,
    scope: Option<String>,
) -> Result<(Vec<String>, Option<String>), ToolError> {
    let fleet = ctx.services().fleet();
    let visible = visible(ctx).await?;
    let revoked = |id: &str| fleet.with_agent(&visible, id, |v| v.status == AgentStatus::Revoked).unwrap_or(false);
    match (agent_ids, scope) {
        (Some(ids), None) => {
            for id in &ids {
                ensure_known(ctx, &visible, id)?;
                if revoked(id) {
                    return Err(ToolError::InvalidArguments(format!(
                        "agent `{id}` was revoked: it can run nothing; leave it out"
                    )));
                }
            }
            Ok((ids, None))
        }
        (None, Some(scope)) => {
            let mut ids: Vec<String> = chosen_agents(ctx, &scope).await?.into_iter().filter(|id| !revoked(id)).collect();
            if ids.is_empty() {
                return Err(ToolError::InvalidArguments(format!(
                    "scope `{scope}` chooses no enrolled, unrevoked agent, so nothing would run; preview_scope_targets shows what a scope chooses"
                )));
            }
            ids.sort();
            Ok((ids, Some(scope)))
        }
        _ => Err(ToolError::InvalidArguments(
            "give exactly one of `agent_ids` or `scope`: an execution never targets the whole fleet by default".into(),
        )),
    }
}

/// One run step from a definition and its parameters (checked again here: the gate checked
/// them before approval, and a handler never trusts what it did not check).
pub(super) fn step(name: &str, params: Option<Map<String, Value>>) -> Result<RunStep, ToolError> {
    let definition = definition(name)?;
    let params = params.unwrap_or_default();
    if let Some(problem) = parameter_problems(definition, &params, "/params").into_iter().next() {
        return Err(ToolError::InvalidArguments(format!("{}: {}", problem.pointer, problem.message)));
    }
    Ok(RunStep {
        definition: definition.name.clone(),
        plugin: definition.plugin.clone(),
        action: definition.action.clone(),
        class: definition.class,
        diagnostic: definition.diagnostic,
        params,
        timeout_ms: definition.timeout_ms,
        secret_names: definition.secrets.clone(),
        config: Default::default(),
        secrets: Default::default(),
        mode: Default::default(),
        approved_plan: None,
        approved_plans: Default::default(),
    })
}

pub(super) struct Started {
    pub(super) execution_id: String,
    pub(super) targeted: usize,
    pub(super) delivered_now: usize,
    pub(super) deadline_ms: i64,
    /// The idempotency key's execution, answered again: nothing new was started.
    pub(super) replayed: bool,
}

/// What the client asked to run, and how.
pub(super) struct Run {
    pub(super) kind: &'static str,
    pub(super) steps: Vec<RunStep>,
    /// A recalled change bound to approved plans: the targets its plan ran on (those a
    /// person saw), whatever its scope chooses now.
    pub(super) approved_targets: Option<Vec<String>>,
    pub(super) agent_ids: Option<Vec<String>>,
    pub(super) scope: Option<String>,
    pub(super) deadline_seconds: Option<i64>,
    pub(super) idempotency_key: Option<String>,
    pub(super) rollout: Option<Rollout>,
}

impl Run {
    /// The arguments as given (the key aside), digested: a retry under a key must repeat them.
    fn digest(&self) -> String {
        let mut arguments = json!({"kind": self.kind, "steps": self.steps, "agent_ids": self.agent_ids,
                               "scope": self.scope, "deadline_seconds": self.deadline_seconds});
        if let Some(rollout) = &self.rollout {
            arguments["rollout"] = json!(rollout);
        }
        toolgate_domain::secrets::hash_secret(&canonical_arguments(&arguments))
    }
}

pub(super) async fn start(ctx: &ToolContext, run: Run) -> Result<Started, ToolError> {
    // Before any target is made: an engaged kill switch stops it on the whole fleet.
    if let Some(switch) = ctx.services().fleet().stopping(&run.steps) {
        return Err(ToolError::Refused {
            message: switch.refusal(),
            remediation: "wait until the switch is released (get_plugin_kill_switch shows it); nothing was started".into(),
        });
    }
    let idempotency = run.idempotency_key.clone().map(|key| Idempotency { key, arguments_digest: run.digest() });
    let (targets, scope) = match run.approved_targets {
        Some(targets) => (targets, run.scope),
        None => resolve_targets(ctx, run.agent_ids, run.scope).await?,
    };
    let now = ctx.services().clock().now_ms();
    let deadline_ms = now + run.deadline_seconds.unwrap_or(DEFAULT_DEADLINE_SECONDS) * 1000;
    let execution_id = new_execution_id();
    let targeted = targets.len();
    let execution = NewExecution {
        execution_id: execution_id.clone(),
        kind: run.kind.into(),
        steps: run.steps,
        scope,
        requested_by: ctx.principal().name.clone(),
        created_at_ms: now,
        deadline_ms,
        targets,
        idempotency,
        rollout: run.rollout,
    };
    let (created, delivered_now) = ctx.services().fleet().start_execution(execution).await?;
    match created {
        Created::New => {}
        Created::Existing { execution_id, same_arguments: true } => {
            let header = header(ctx, &execution_id).await?;
            let targeted = header.counts.iter().map(|(_, n)| *n as usize).sum();
            ctx.log().info(&format!("{execution_id}: its idempotency key came again; nothing new was started"));
            return Ok(Started { execution_id, targeted, delivered_now: 0, deadline_ms: header.deadline_ms, replayed: true });
        }
        Created::Existing { execution_id, same_arguments: false } => {
            let key = run.idempotency_key.unwrap_or_default();
            return Err(ToolError::InvalidArguments(format!(
                "idempotency_key `{key}` belongs to execution {execution_id}, started with other arguments: \
                 repeat those arguments to read it again, or use a new key for a new execution"
            )));
        }
    }
    ctx.log().info(&format!(
        "{execution_id}: sent to {delivered_now} of {targeted} agents now; the others get it when they connect, until the deadline"
    ));
    Ok(Started { execution_id, targeted, delivered_now, deadline_ms, replayed: false })
}

/// `rollout` as the tool takes it, checked.
pub(super) fn rollout(batch: Value, max_failures: Option<i64>, pause_ms: Option<i64>) -> Result<Rollout, ToolError> {
    Rollout::from_argument(&json!({"batch": batch, "max_failures": max_failures, "pause_ms": pause_ms}))
        .map_err(ToolError::InvalidArguments)
}

/// One audit row per step of a new bundle (beside the call's own), so a step can be found in
/// the log by its definition, durable before the answer as the call's row is.
pub(super) async fn audit_steps(ctx: &ToolContext, s: &Started, definitions: &[String]) {
    use toolgate_domain::audit::{AuditEvent, AuditOutcome, TargetType};
    let services = ctx.services();
    for (i, definition) in definitions.iter().enumerate() {
        let detail = format!(
            "bundle {} step {i} of {}: {definition} on {} agent(s)",
            s.execution_id,
            definitions.len(),
            s.targeted
        );
        let event = AuditEvent::new(services.clock().now_ms(), "execution.bundle_step", AuditOutcome::Success)
            .by(ctx.caller())
            .target(TargetType::BundleStep, format!("{}#{i}", s.execution_id))
            .detail(detail)
            .correlation(ctx.correlation_id().to_string());
        services.audit().record_durable(event).await;
    }
}

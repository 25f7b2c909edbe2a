//! Running instructions on agents and following them: executions and bundles are stored
//! before anything is sent (the hub's `start_execution`), so the answer's id is good even if
//! the client goes away at once.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use toolgate_domain::groups::Visible;
use toolgate_domain::fleet::instruction::{ActionClass, ExecutionState, TargetStatus};
use toolgate_domain::fleet::rollout::Batch;
use toolgate_domain::{ToolError, ToolOutput, ToolResult};
use toolgate_store::{ExecutionHeader, Reader};

#[path = "executions/starting.rs"]
mod starting;

pub(crate) use starting::resolve_targets;
use starting::{Run, Started, audit_steps, start, step};
use super::confined::one_agent;
use super::fleet::DEFAULT_LIMIT;
use crate::instructions::definition;
use super::pages::Pager;
use crate::args;
use crate::services::ToolContext;

/// The seeds' poll floor: how long a client should wait before asking again.
pub(crate) const RETRY_AFTER_MS: i64 = 2_000;

pub async fn execute_instruction(ctx: &ToolContext, args: args::ExecuteInstruction) -> ToolResult {
    let plan_only = args.plan_only.unwrap_or(false);
    let mut planned = step(&args.definition, args.params)?;
    starting::check_allowed_path(ctx, &planned).await?;
    let mut approved_targets = None;
    if plan_only {
        planned = starting::as_plan(planned)?;
    } else if let Some(approval_id) = ctx.approval_id()
        && planned.class == ActionClass::Change
    {
        let (approved, targets) = starting::approved_plans(ctx, approval_id).await?;
        planned.approved_plans = approved;
        approved_targets = Some(targets);
    }
    let steps = vec![planned];
    let run = Run {
        kind: "instruction",
        steps,
        approved_targets,
        agent_ids: args.agent_ids,
        scope: args.scope,
        deadline_seconds: args.deadline_seconds,
        idempotency_key: args.idempotency_key,
        rollout: args.rollout.map(|r| starting::rollout(r.batch, r.max_failures, r.pause_ms)).transpose()?,
    };
    let s = start(ctx, run).await?;
    // 2026-07-28 with the tasks extension: the execution is the task the client polls.
    let as_task = ctx.task().start().await;
    let mut answer = json!({
        "execution_id": s.execution_id,
        "definition": args.definition,
        "targeted": s.targeted,
        "delivered_now": s.delivered_now,
        "deadline_ms": s.deadline_ms,
        "retry_after_ms": RETRY_AFTER_MS,
    });
    if s.replayed {
        answer["replayed"] = json!(true);
    }
    if plan_only {
        answer["plan_only"] = json!(true);
    }
    if let Some(followed) = follow(ctx, &s, as_task).await.map_err(|e| e.after_start(&s.execution_id))? {
        let (counts, _, finished) = counts(&followed);
        answer["finished"] = json!(finished);
        answer["counts"] = json!(counts);
        if finished {
            answer["retry_after_ms"] = Value::Null;
        }
    }
    Ok(ToolOutput::Structured(answer))
}

/// How often a followed execution is looked at, and the longest a client is kept waiting
/// on one (the execution goes on after it; poll get_execution_status).
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(250);
const FOLLOW_AT_MOST: std::time::Duration = std::time::Duration::from_secs(120);

/// When the client asked for progress, or polls the call as a task: reports agents
/// responded / agents targeted as they answer, until the execution finishes, the client goes
/// away (or cancels the task) or [`FOLLOW_AT_MOST`] passes. The last state seen; None when
/// nobody waits.
async fn follow(ctx: &ToolContext, s: &Started, as_task: bool) -> Result<Option<ExecutionHeader>, ToolError> {
    let progress = ctx.progress();
    if !progress.is_active() && !as_task {
        return Ok(None);
    }
    let total = s.targeted as f64;
    // A rollout's progress says which wave it is in.
    let message = |done: i64, header: Option<&ExecutionHeader>| {
        let wave = header.and_then(|h| h.rollout).map(|r| format!("wave {} of {}: ", r.released_wave + 1, r.waves));
        format!("{}{done} of {} agents responded ({})", wave.unwrap_or_default(), s.targeted, s.execution_id)
    };
    progress.report_execution(&s.execution_id, 0.0, Some(total), Some(&message(0, None)));
    let until = tokio::time::Instant::now() + FOLLOW_AT_MOST;
    loop {
        let stopped = tokio::select! {
            _ = ctx.cancellation().cancelled() => true,
            _ = tokio::time::sleep(FOLLOW_EVERY) => false,
        };
        let header = header(ctx, &s.execution_id).await?;
        let responded: i64 = header.counts.iter().filter(|(status, _)| status.is_final()).map(|(_, n)| n).sum();
        progress.report_execution(&s.execution_id, responded as f64, Some(total), Some(&message(responded, Some(&header))));
        if stopped || responded as usize >= s.targeted || tokio::time::Instant::now() >= until {
            return Ok(Some(header));
        }
    }
}

pub async fn execute_bundle(ctx: &ToolContext, args: args::ExecuteBundle) -> ToolResult {
    let steps = args.steps.into_iter().map(|s| step(&s.definition, s.params)).collect::<Result<Vec<_>, _>>()?;
    for planned in &steps {
        starting::check_allowed_path(ctx, planned).await?;
    }
    let count = steps.len();
    let definitions: Vec<String> = steps.iter().map(|s| s.definition.clone()).collect();
    let run = Run {
        approved_targets: None,
        kind: "bundle",
        steps,
        agent_ids: args.agent_ids,
        scope: args.scope,
        deadline_seconds: args.deadline_seconds,
        idempotency_key: args.idempotency_key,
        rollout: args.rollout.map(|r| starting::rollout(r.batch, r.max_failures, r.pause_ms)).transpose()?,
    };
    let s = start(ctx, run).await?;
    if !s.replayed {
        audit_steps(ctx, &s, &definitions).await;
    }
    let mut answer = json!({
        "bundle_id": s.execution_id,
        "steps": count,
        "targeted": s.targeted,
        "delivered_now": s.delivered_now,
        "deadline_ms": s.deadline_ms,
        "retry_after_ms": RETRY_AFTER_MS,
    });
    if s.replayed {
        answer["replayed"] = json!(true);
    }
    Ok(ToolOutput::Structured(answer))
}

/// The caller as a reader of executions: its own, and those whose every target its grant of
/// the tool's pair covers. Anything else does not exist for it.
pub(crate) fn reader(ctx: &ToolContext) -> Reader {
    Reader { principal: ctx.principal().name.clone(), reach: ctx.reach().clone() }
}

/// The execution, if the caller may read it; the unknown-execution error otherwise (the
/// same answer for another's).
pub(crate) async fn header(ctx: &ToolContext, execution_id: &str) -> Result<ExecutionHeader, ToolError> {
    ctx.services().work().execution(execution_id, Some(&reader(ctx))).await?.ok_or_else(|| {
        ToolError::NotFound(format!("no execution `{execution_id}`; list_executions lists them, newest first"))
    })
}

fn counts(header: &ExecutionHeader) -> (Map<String, Value>, i64, bool) {
    let counts: Map<String, Value> = header.counts.iter().map(|(s, n)| (s.as_str().to_string(), json!(n))).collect();
    let targeted = header.counts.iter().map(|(_, n)| n).sum();
    let finished = header.counts.iter().all(|(s, n)| s.is_final() || *n == 0);
    (counts, targeted, finished)
}

/// Where the execution's waves stand, as get_execution_status tells it.
fn rollout(header: &ExecutionHeader) -> Value {
    let Some(state) = header.rollout else { return Value::Null };
    let batch = match state.rollout.batch {
        Batch::Hosts(n) => json!(n),
        Batch::Percent(p) => json!(format!("{p}%")),
    };
    json!({"batch": batch, "max_failures": state.rollout.max_failures, "pause_ms": state.rollout.pause_ms,
           "wave": state.released_wave + 1, "waves": state.waves})
}

fn definitions(header: &ExecutionHeader) -> Vec<&str> {
    header.steps.iter().map(|s| s.definition.as_str()).collect()
}

/// A result poll's `retry_after_ms` (null once finished); the verdict is counted per tool
/// (`toolgate_mcp_poll_total`) so the retry floor can be tuned from real polling.
pub(crate) fn poll_verdict(tool: &'static str, finished: bool) -> Value {
    crate::metrics::poll(tool, finished);
    if finished { Value::Null } else { json!(RETRY_AFTER_MS) }
}

pub async fn get_execution_status(ctx: &ToolContext, args: args::GetExecutionStatus) -> ToolResult {
    let header = header(ctx, &args.execution_id).await?;
    let wanted = args.status.as_deref().map(TargetStatus::parse).transpose().map_err(ToolError::InvalidArguments)?;
    let pager = Pager::of(&args, DEFAULT_LIMIT as usize)?;
    // Paged in SQL: clients poll this, and an execution may target ten thousand agents.
    let page = ctx.services().work().targets_page(&args.execution_id, wanted, pager.start(), pager.limit()).await?;
    let agents: Vec<Value> = page
        .iter()
        .map(|t| {
            json!({
                "agent_id": t.agent_id,
                "hostname": ctx.services().fleet().hostname(&Visible::All, &t.agent_id),
                "status": t.status.as_str(),
                "error": t.error,
                "updated_at_ms": t.updated_at_ms,
            })
        })
        .collect();
    let (counts, targeted, finished) = counts(&header);
    let responded = header.counts.iter().filter(|(s, _)| s.is_final()).map(|(_, n)| n).sum::<i64>();
    let matching: i64 = header.counts.iter().filter(|(s, _)| wanted.is_none_or(|w| *s == w)).map(|(_, n)| n).sum();
    let envelope = json!({
        "execution_id": header.execution_id,
        "kind": header.kind,
        "definitions": definitions(&header),
        "requested_by": header.requested_by,
        "created_at_ms": header.created_at_ms,
        "deadline_ms": header.deadline_ms,
        "cancelled_at_ms": header.cancelled_at_ms,
        "targeted": targeted,
        "responded": responded,
        "finished": finished,
        "counts": counts,
        "rollout": rollout(&header),
        "retry_after_ms": poll_verdict("get_execution_status", finished),
    });
    pager.answer(ctx, envelope, "agents", agents, matching.max(0) as usize)
}

pub async fn list_executions(ctx: &ToolContext, args: args::ListExecutions) -> ToolResult {
    if let Some(name) = &args.definition {
        definition(name)?;
    }
    let state = args.status.as_deref().map(ExecutionState::parse).transpose().map_err(ToolError::InvalidArguments)?;
    let pager = Pager::of(&args, 50)?;
    let work = &ctx.services().work();
    let reader = reader(ctx);
    let definition = args.definition.as_deref();
    let page = work.executions(definition, state, Some(&reader), pager.start(), pager.limit()).await?;
    let total = work.count_executions(definition, state, Some(&reader)).await?;
    let executions: Vec<Value> = page
        .iter()
        .map(|h| {
            let (counts, targeted, finished) = counts(h);
            json!({
                "execution_id": h.execution_id,
                "kind": h.kind,
                "definitions": definitions(h),
                "requested_by": h.requested_by,
                "created_at_ms": h.created_at_ms,
                "deadline_ms": h.deadline_ms,
                "targeted": targeted,
                "finished": finished,
                "counts": counts,
            })
        })
        .collect();
    pager.answer(ctx, json!({}), "executions", executions, total)
}

/// How many `already_ran` entries a cancellation lists.
const SHOWN_ALREADY_RAN: usize = 100;

pub async fn cancel_execution(ctx: &ToolContext, args: args::CancelExecution) -> ToolResult {
    // Another's execution does not exist for the caller: it cannot stop it either.
    header(ctx, &args.execution_id).await?;
    let now = ctx.services().clock().now_ms();
    let Some(cancelled) = ctx.services().work().cancel(&args.execution_id, now).await? else {
        return Err(ToolError::NotFound(format!("no execution `{}`; list_executions lists them", args.execution_id)));
    };
    let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
    for t in &cancelled.targets {
        *counts.entry(t.status.as_str()).or_default() += 1;
    }
    let already_ran: Vec<Value> = cancelled
        .targets
        .iter()
        .filter(|t| !matches!(t.status, TargetStatus::Cancelled | TargetStatus::Pending | TargetStatus::Offline))
        .take(SHOWN_ALREADY_RAN)
        .map(|t| json!({"agent_id": t.agent_id, "status": t.status.as_str()}))
        .collect();
    Ok(ToolOutput::Structured(json!({
        "execution_id": args.execution_id,
        "stopped": cancelled.stopped,
        "counts": counts,
        "already_ran": already_ran,
    })))
}

pub async fn get_bundle_result(ctx: &ToolContext, args: args::GetBundleResult) -> ToolResult {
    let pager = Pager::of(&args, usize::MAX)?;
    let header = header(ctx, &args.bundle_id).await?;
    if let Some(agent_id) = &args.agent_id {
        one_agent(ctx, agent_id).await?;
    }
    let work = &ctx.services().work();
    let targets = work.targets(&args.bundle_id).await?;
    let steps = work.steps(&args.bundle_id).await?;
    let names = definitions(&header);
    let agents: Vec<Value> = targets
        .iter()
        .filter(|t| args.agent_id.as_ref().is_none_or(|a| a == &t.agent_id))
        .map(|t| {
            let own: Vec<Value> = steps
                .iter()
                .filter(|s| s.agent_id == t.agent_id)
                .map(|s| {
                    json!({
                        "step": s.step,
                        "definition": names.get(s.step).copied().unwrap_or("?"),
                        "status": s.status,
                        "error": s.error,
                        "rows": s.row_count,
                    })
                })
                .collect();
            json!({"agent_id": t.agent_id, "status": t.status.as_str(), "steps": own})
        })
        .collect();
    let (_, _, finished) = counts(&header);
    // Per step: agents expected to answer it, answers received, and how many succeeded.
    let expected = targets.len();
    let step_counts: Vec<Value> = names
        .iter()
        .enumerate()
        .map(|(i, definition)| {
            let answered = steps.iter().filter(|s| s.step == i);
            let received = answered.clone().count();
            let succeeded = answered.filter(|s| s.status == "succeeded").count();
            json!({"step": i, "definition": definition, "expected": expected, "received": received, "succeeded": succeeded})
        })
        .collect();
    let (agents, count) = pager.window(agents);
    let envelope = json!({
        "bundle_id": header.execution_id,
        "steps": names,
        "step_counts": step_counts,
        "finished": finished,
        "retry_after_ms": poll_verdict("get_bundle_result", finished),
    });
    pager.answer(ctx, envelope, "agents", agents, count)
}

//! One tool call, in the order it is decided: the protocol's checks (a name, object
//! arguments, a known tool, 2026-07-28's headers, required client capabilities, this round's
//! answers), then the gate, then the handler's context, the client's confirmation, and the
//! handler. The streamed and task variants run the same steps (`super`).

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Map, Value, json};
use toolgate_domain::audit::AuditOutcome;
use toolgate_domain::catalogue::{TaskSupport, ToolMeta};
use toolgate_domain::{AskError, Caller, ClientRequests, Denial, ToolContext, ToolError, ToolOutput};
use toolgate_policy::OperationClass;

use super::super::asking::{self, Round};
use super::super::jsonrpc as rpc;
use super::super::request::{Outcome, Request};
use super::super::{McpServer, Reply, headers};
use crate::registry::ToolId;
use crate::tools::dispatch;

/// What a tools/call names: the tool (None: not in the catalogue), its arguments as sent,
/// and the answers a 2026-07-28 retry carries.
pub struct Named {
    pub name: String,
    pub tool: Option<ToolId>,
    pub arguments: Option<Value>,
    pub retry: asking::Retry,
}

/// A call past the protocol's checks: a known tool with object arguments, and (2026-07-28)
/// this round's verified answers.
pub struct Checked {
    pub tool: ToolId,
    pub arguments: Value,
    pub round: Option<Round>,
    /// The client negotiated 2026-07-28's tasks extension.
    pub tasks_negotiated: bool,
}

/// What a handler that may start a task is given (`super::task` makes it).
pub struct TaskHooks {
    pub client: ClientRequests,
    pub starter: toolgate_domain::TaskStarter,
    pub cancellation: toolgate_domain::CancellationToken,
}

/// The protocol's checks, before the gate sees anything.
pub async fn checked(
    server: &Arc<McpServer>,
    caller: &Caller,
    headers: &HeaderMap,
    request: &Request<'_>,
    named: Named,
) -> Result<Checked, Outcome> {
    let Named { name, tool, arguments, retry } = named;
    if name.is_empty() {
        return Err(request.error(rpc::INVALID_PARAMS, "tools/call needs params.name (a string)".into(), None));
    }
    let arguments = match arguments {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(a @ Value::Object(_)) => a,
        Some(_) => return Err(request.error(rpc::INVALID_PARAMS, "params.arguments must be an object".into(), None)),
    };
    let Some(tool) = tool else {
        let (message, suggestions) = super::super::lists::unknown_tool(server, caller, &name);
        let data = json!({"suggestions": suggestions, "correlation_id": request.correlation_id});
        return Err(request.error(rpc::INVALID_PARAMS, message, Some(data)));
    };
    let meta = tool.meta();
    // The read-only kill switch answers before any protocol detail of a tool it refuses.
    if server.gate.refused_by_read_only(meta) {
        return Err(request.denied(server, Denial::ReadOnlyMode { tool: meta.name }));
    }
    if request.era.mirrors_in_headers()
        && let Err(message) =
            headers::check_param_headers(server.gate.schemas().input_schema(meta), headers, &arguments)
    {
        return Err(Outcome {
            detail: message.clone(),
            reply: Reply::error(StatusCode::BAD_REQUEST, request.id, rpc::HEADER_MISMATCH, &message, None),
            result: AuditOutcome::Denied,
        });
    }
    if let Some(outcome) = asking::missing_capabilities(server, request, meta) {
        return Err(outcome);
    }
    let tasks_negotiated = super::super::tasks::negotiated(request.era.client_capabilities());
    if request.era.has_tasks() && meta.task_support == TaskSupport::Required && !tasks_negotiated {
        let extension = super::super::tasks::EXTENSION;
        let message = format!("{} runs only as a task: declare the {extension} extension", meta.name);
        let data = json!({"requiredCapabilities": super::super::tasks::required_capabilities(),
                          "correlation_id": request.correlation_id});
        return Err(request.error(rpc::MISSING_CLIENT_CAPABILITY, message, Some(data)));
    }
    // 2026-07-28: this round's answers, checked against the state the last round issued.
    let round = match request.era.asks_in_rounds() {
        true => Some(retry.round(server, caller, request, "tools/call", meta.name, &arguments).await?),
        false => None,
    };
    Ok(Checked { tool, arguments, round, tasks_negotiated })
}

/// A call the gate passed: its handler's context, how it runs (as a task or not), and what
/// its audit row says of the approval or confirmation behind it.
pub struct Prepared {
    pub tool: ToolId,
    pub ctx: crate::services::ToolContext,
    pub arguments: Value,
    pub round: Option<Round>,
    /// `approval … by …; ` (and, once confirmed, that too), for the audit row's detail.
    pub approved: String,
    /// The client's user must confirm first (policy.yaml `confirm`).
    pub confirm: bool,
    pub ticket: Ticket,
}

/// Whether an approval ticket was spent on the call, so that an outcome short of success
/// counts it as burned.
#[derive(Clone, Copy)]
pub struct Ticket {
    tool: &'static str,
    consumed: bool,
}

impl Ticket {
    pub fn settle(self, outcome: Outcome) -> Outcome {
        use crate::metrics::BurnReason;
        match outcome.result {
            AuditOutcome::Success => {}
            _ if !self.consumed => {}
            AuditOutcome::Denied => crate::metrics::approval_burned(self.tool, BurnReason::Refused),
            _ => crate::metrics::approval_burned(self.tool, BurnReason::Failed),
        }
        outcome
    }
}

/// The gate (tier, RBAC, schema, approval), then the handler's context (with `task`'s hooks
/// when it may run as a task).
pub async fn prepare(
    server: &Arc<McpServer>,
    caller: &Caller,
    request: &Request<'_>,
    checked: Checked,
    task: Option<TaskHooks>,
) -> Result<Prepared, Outcome> {
    let Checked { tool, arguments, round, .. } = checked;
    let meta = tool.meta();
    let passed = match server.gate.pass(caller, meta, arguments).await {
        Ok(passed) => passed,
        Err(denial) => {
            // Counted apart from the RBAC refusals that share its -32003.
            if let Denial::NotRedeemable { why, .. } = &denial {
                crate::metrics::recall_refused(meta.name, why.label());
            }
            return Err(request.denied_tool(server, denial, meta));
        }
    };
    if let Some(ticket) = passed.planning {
        let ctx = ToolContext::builder(server.services_handle())
            .caller(caller.clone())
            .reach(passed.reach)
            .correlation_id(request.correlation_id.clone())
            .build();
        plan_for_ticket(server, &ticket, tool, &ctx, passed.arguments).await;
        return Err(request.denied_tool(server, Denial::ApprovalPending { approval: ticket, minted: true }, meta));
    }
    // The ticket is spent from here on: if the call does not run to success, it burned.
    let consumed = passed.approval.is_some();
    if consumed {
        crate::metrics::approval(crate::metrics::ApprovalEvent::Consumed, meta.name);
    }
    let approval_id = passed.approval.as_ref().map(|a| a.id.clone());
    let approved = passed
        .approval
        .map(|a| format!("approval {} by {}; ", a.id, a.reviewer.unwrap_or_default()))
        .unwrap_or_default();
    let builder = ToolContext::builder(server.services_handle())
        .caller(caller.clone())
        .reach(passed.reach)
        .approval_id(approval_id)
        .correlation_id(request.correlation_id.clone())
        .progress(request.listeners.progress.clone())
        .listing(request.listeners.listing.clone())
        .log(request.listeners.log.clone());
    let ctx = match (task, &round) {
        (Some(hooks), _) => builder.client(hooks.client).task(hooks.starter).cancellation(hooks.cancellation),
        (None, Some(round)) => builder
            .client(ClientRequests::new(round.channel.clone()))
            .cancellation(request.listeners.cancellation.clone()),
        (None, None) => {
            builder.client(request.listeners.client.clone()).cancellation(request.listeners.cancellation.clone())
        }
    }
    .build();
    let arguments = passed.arguments;
    let ticket = Ticket { tool: meta.name, consumed };
    Ok(Prepared { tool, ctx, arguments, round, approved, confirm: passed.confirm, ticket })
}

/// Runs a held change once as a plan (its arguments already ask for one) and links the plan
/// execution to the ticket, for the person deciding to see what each host would change. A
/// call that cannot plan (a read has no plan) keeps a ticket without one, as before.
async fn plan_for_ticket(
    server: &McpServer,
    ticket: &toolgate_domain::approvals::Approval,
    tool: ToolId,
    ctx: &crate::services::ToolContext,
    arguments: Value,
) {
    let started = match dispatch(tool, ctx, arguments).await {
        Ok(ToolOutput::Structured(started)) => started,
        Ok(_) => return,
        Err(e) => {
            tracing::info!(approval_id = %ticket.id, "the held call has no plan: {e}");
            return;
        }
    };
    let Some(execution_id) = started.get("execution_id").and_then(Value::as_str) else { return };
    match server.services().approvals().link_plan(&ticket.id, execution_id).await {
        Ok(()) => tracing::info!(approval_id = %ticket.id, %execution_id, "planning the held change"),
        Err(e) => tracing::warn!(approval_id = %ticket.id, "the plan could not be linked to its ticket: {e}"),
    }
}

/// A confirm-gated call asks its client's user first: `Some` is the outcome when the answer
/// is not a yes (or cannot be had), `None` lets the call run.
pub async fn confirmed(server: &McpServer, request: &Request<'_>, prepared: &mut Prepared) -> Option<Outcome> {
    if !prepared.confirm {
        return None;
    }
    let meta = prepared.tool.meta();
    if prepared.round.is_none() && server.options.streams.plain_json_only {
        return Some(asking::unconfirmable_without_streams(server, request, meta));
    }
    let (ctx, arguments, round) = (&prepared.ctx, &prepared.arguments, prepared.round.as_ref());
    let refused = asking::confirm(server, request, ctx, meta, arguments, round).await;
    if refused.is_none() {
        prepared.approved.push_str("confirmed by the client's user; ");
    }
    refused
}

/// The handler, run in this request (not as a task).
pub async fn run(server: &McpServer, request: &Request<'_>, prepared: Prepared) -> Outcome {
    let Prepared { tool, ctx, arguments, approved, round, ticket, .. } = prepared;
    let outcome = match run_handler(server, request, tool, &ctx, arguments, approved).await {
        Ok(outcome) => outcome,
        Err(asked) => asking::unanswered(server, request, round.as_ref(), asked),
    };
    ticket.settle(outcome)
}

pub async fn run_handler(
    server: &McpServer,
    request: &Request<'_>,
    tool: ToolId,
    ctx: &crate::services::ToolContext,
    arguments: Value,
    approved: String,
) -> Result<Outcome, AskError> {
    let meta = tool.meta();
    let outcome = match dispatch(tool, ctx, arguments).await {
        Ok(ToolOutput::Structured(value)) => match output_breaks_schema(server, request, meta, &value) {
            Some(broken) => broken,
            None => Outcome {
                reply: match meta.agent_data {
                    true => request.era.agent_data_success(request.id, server, value, None),
                    false => request.era.structured_success(request.id, server, &value),
                },
                result: AuditOutcome::Success,
                detail: format!("{approved}ran"),
            },
        },
        Ok(ToolOutput::Summarized { structured, text }) if meta.agent_data => {
            match output_breaks_schema(server, request, meta, &structured) {
                Some(broken) => broken,
                None => Outcome {
                    reply: request.era.agent_data_success(request.id, server, structured, Some(text)),
                    result: AuditOutcome::Success,
                    detail: format!("{approved}ran"),
                },
            }
        }
        Ok(ToolOutput::Summarized { structured, text }) => match output_breaks_schema(server, request, meta, &structured) {
            Some(broken) => broken,
            None => Outcome {
                reply: request.era.success(
                    request.id,
                    server,
                    json!({"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": false}),
                ),
                result: AuditOutcome::Success,
                detail: format!("{approved}ran"),
            },
        },
        Ok(ToolOutput::Static(raw)) => {
            let result: Value = serde_json::from_str(raw).expect("generated JSON");
            let failed = result["isError"] == true;
            Outcome {
                reply: request.era.success(request.id, server, result),
                result: if failed { AuditOutcome::Failure } else { AuditOutcome::Success },
                detail: format!("{approved}static result"),
            }
        }
        Err(ToolError::Refused { message, remediation }) => {
            let data =
                json!({"correlation_id": request.correlation_id, "retry_after_ms": null, "remediation": remediation});
            Outcome {
                detail: format!("{}: {message}", rpc::PERMISSION_DENIED),
                reply: Reply::error(StatusCode::OK, request.id, rpc::PERMISSION_DENIED, &message, Some(data)),
                result: AuditOutcome::Denied,
            }
        }
        Err(ToolError::Ask(asked)) => return Err(asked),
        Err(e) if e.is_internal() => {
            tracing::error!(correlation_id = %request.correlation_id, tool = meta.name, "tool failed: {e}");
            let data = match &e {
                ToolError::StoreAfterStart { execution_id, .. } => json!({
                    "correlation_id": request.correlation_id, "retry_after_ms": meta.store_fault_retry_ms,
                    "execution_id": execution_id,
                    "remediation": format!("execution {execution_id} was started before the store failed: follow it with get_execution_status in a few seconds; do not call again, which would start another"),
                }),
                _ => json!({"correlation_id": request.correlation_id, "retry_after_ms": meta.store_fault_retry_ms,
                            "remediation": "a transient store fault; retry in a few seconds"}),
            };
            let message = format!("{} failed: {e}", meta.name);
            Outcome {
                detail: e.to_string(),
                reply: Reply::error(StatusCode::OK, request.id, rpc::INTERNAL_ERROR, &message, Some(data)),
                result: AuditOutcome::Failure,
            }
        }
        Err(e) => Outcome {
            detail: format!("{approved}{e}"),
            reply: request.era.success(
                request.id,
                server,
                json!({"content": [{"type": "text", "text": e.to_string()}], "isError": true}),
            ),
            result: AuditOutcome::Failure,
        },
    };
    Ok(within_answer_cap(server, request, meta, outcome))
}

/// An answer larger than one answer may carry (`--max-answer-bytes`) is replaced by an error
/// saying how to ask for less. A call that may have changed something says that it ran: its
/// effect stands, only its answer is withheld.
fn within_answer_cap(server: &McpServer, request: &Request<'_>, meta: &ToolMeta, outcome: Outcome) -> Outcome {
    let cap = server.options.answers.max_answer_bytes;
    let Some(size) = outcome.reply.body.as_ref().and_then(|body| body.size()).filter(|size| *size > cap) else {
        return outcome;
    };
    let text = match meta.class {
        OperationClass::Read => format!(
            "{}'s answer is {size} bytes, more than the {cap} one answer may carry: ask for less (a narrower filter or scope, fewer `columns`, a smaller `limit`)",
            meta.name
        ),
        _ => format!(
            "{} ran (its effect stands), but its answer is {size} bytes, more than the {cap} one answer may carry: read the outcome back with a read tool, in pages",
            meta.name
        ),
    };
    Outcome {
        detail: format!("{}; answer withheld: {size} bytes over the cap of {cap}", outcome.detail),
        reply: request.era.success(
            request.id,
            server,
            json!({"content": [{"type": "text", "text": text}], "isError": true}),
        ),
        result: match meta.class {
            OperationClass::Read => AuditOutcome::Failure,
            _ => outcome.result,
        },
    }
}

/// Debug builds check every structured result against the tool's outputSchema: a handler
/// that breaks its own contract is an internal error there, never a silent surprise.
fn output_breaks_schema(server: &McpServer, request: &Request<'_>, meta: &ToolMeta, value: &Value) -> Option<Outcome> {
    if !cfg!(debug_assertions) {
        return None;
    }
    let message = server.gate.schemas().output_problem(meta, value)?;
    let data = json!({"correlation_id": request.correlation_id});
    Some(Outcome {
        detail: message.clone(),
        reply: Reply::error(StatusCode::OK, request.id, rpc::INTERNAL_ERROR, &message, Some(data)),
        result: AuditOutcome::Failure,
    })
}

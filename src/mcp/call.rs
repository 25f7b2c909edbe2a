//! tools/call: the protocol's checks (a name, object arguments, a known tool, 2026-07-28's
//! headers, required client capabilities), then the gate, then the handler. Every outcome is
//! audited with the correlation id the client sees.

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Map, Value, json};
use toolgate_domain::approvals::canonical_arguments;
use toolgate_domain::audit::{AuditEvent, AuditOutcome, TargetType};
use toolgate_domain::catalogue::{TaskSupport, ToolMeta};
use toolgate_domain::redact::{redacted, truncated, truncated_owned};
use toolgate_domain::{
    AskError, Caller, ClientMethod, ClientRequests, Denial, LogLevel, ProgressSink, ToolContext, ToolError, ToolOutput,
};
use toolgate_policy::OperationClass;

use super::asking;
use super::in_flight::InFlightGuard;
use super::jsonrpc::{self as rpc};
use super::task_call::TaskMode;
use super::{McpServer, Reply, headers, stream};
use crate::registry::{ToolId, dispatch};

pub(super) use super::request::{Era, Listeners, Outcome, Request};

/// From this revision on, a resumable stream opens with a priming event.
const PRIMING_FROM: &str = "2025-11-25";

/// What the call's session (if any) adds: its registration, whose cancellation token the
/// client's `notifications/cancelled` fires, and the log level it asked for.
#[derive(Default)]
pub struct InSession {
    pub in_flight: Option<InFlightGuard>,
    pub log_level: Option<LogLevel>,
    /// The live session the call came in (handshake era): where the client's answers to a
    /// handler's questions arrive.
    pub session_id: Option<String>,
    /// That session's replay ring (its streams resume from it).
    pub ring: Option<Arc<super::replay::Ring>>,
}

pub async fn tools_call(
    server: &Arc<McpServer>,
    caller: &Caller,
    headers: &HeaderMap,
    id: &Value,
    params: Option<Value>,
    era: &Era,
    session: InSession,
) -> Reply {
    let InSession { in_flight, log_level, session_id, ring } = session;
    let token = stream::progress_token(params.as_ref());
    // A session whose client takes questions answers its calls on a stream they can go out on
    // (still a plain JSON body when the handler asks nothing).
    let ask_session = session_id.filter(|_| {
        let declared = era.client_capabilities.as_ref();
        ClientMethod::ALL.iter().any(|m| declared.and_then(|c| c.get(m.capability())).is_some_and(Value::is_object))
    });
    let streaming = !server.options.streams.plain_json_only;
    if (token.is_some() || log_level.is_some() || ask_session.is_some()) && streaming && stream::accepts_sse(headers) {
        let permit = match server.streams.admit(&caller.principal.name, super::admission::StreamKind::Call) {
            Ok(permit) => permit,
            Err(cap) => return cap.refusal(server, id),
        };
        let (server, caller, headers, id, era) =
            (server.clone(), caller.clone(), headers.clone(), id.clone(), era.clone());
        // SEP-1699 (2025-11-25): a resumable stream starts with an id and nothing else.
        let priming = ring.is_some() && era.version.as_str() >= PRIMING_FROM;
        let wants = stream::Wants { progress: token, log_level, ask_session, ring, priming, permit };
        return stream::tools_call(server, caller, headers, id, params, era, wants, in_flight).await;
    }
    let cancellation = in_flight.as_ref().map_or_else(|| server.call_cancellation(), |r| r.cancellation.clone());
    // A progress token on a POST that takes no stream, in a session: the progress goes out on
    // the session's GET channel, where the client hears what the server sends unasked.
    let progress = match (token, ring) {
        (Some(token), Some(ring)) => stream::progress_on_channel(ring, token),
        // Behind a buffering proxy: the call waits as a streamed one would, and its final
        // result carries what the progress would have said.
        (Some(_), None) if !streaming => ProgressSink::new(|_| {}),
        _ => ProgressSink::none(),
    };
    let listeners = Listeners { cancellation, progress, ..Listeners::default() };
    answer(server, caller, headers, id, params, era, listeners).await
}

/// A call whose task failed (a panic in a handler): an internal error answering request
/// `id`, never a hang.
pub fn task_failed(id: &Value, why: &str) -> Reply {
    tracing::error!("a tools/call task failed: {why}");
    let data = json!({"retry_after_ms": null, "remediation": "a fault inside the server; the log has it. Durable work (an execution) may have started: look it up before calling again"});
    Reply::error(StatusCode::OK, id, rpc::INTERNAL_ERROR, "the call failed inside the server", Some(data))
}

/// The call, its audit row and its answer, with its listeners.
pub async fn answer(
    server: &Arc<McpServer>,
    caller: &Caller,
    headers: &HeaderMap,
    id: &Value,
    params: Option<Value>,
    era: &Era,
    listeners: Listeners,
) -> Reply {
    let request = Request { id, era, correlation_id: server.correlation_id(), listeners };
    let mut params = params.unwrap_or(Value::Null);
    let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
    let arguments = params.get_mut("arguments").map(Value::take);
    let retry = asking::Retry::take(&mut params);
    let tool = ToolId::from_name(&name);
    // The audit target is the arguments as shown: sensitive values redacted. An unknown
    // tool's arguments are not recorded at all: nothing says which of them are secret.
    let target = match (&arguments, tool) {
        (Some(arguments), Some(tool)) => {
            let sensitive = tool.meta().sensitive_arguments;
            let shown = match sensitive.is_empty() {
                true => canonical_arguments(arguments),
                false => canonical_arguments(&redacted(arguments, sensitive)),
            };
            Some(truncated_owned(shown, 512))
        }
        _ => None,
    };
    let outcome = call(server, caller, headers, &request, &name, tool, arguments, retry).await;
    crate::metrics::tool_call(tool, outcome.result);
    let action = match tool {
        Some(tool) => format!("mcp.{}", tool.meta().name),
        None => format!("mcp.{}", truncated(&name, 128)),
    };
    let mut event = AuditEvent::new(server.now_ms(), action, outcome.result)
        .by(caller)
        .detail(truncated_owned(outcome.detail, 1024))
        .correlation(request.correlation_id);
    if let Some(target) = target {
        event = event.target(TargetType::ToolArguments, target);
    }
    // A call that may change state answers only once its row is durable (group commit with
    // the other calls in flight); a read's row is written without waiting.
    match tool {
        Some(tool) if tool.meta().class != OperationClass::Read => server.record_durable(event).await,
        _ => server.record(event),
    }
    outcome.reply
}

#[allow(clippy::too_many_arguments)]
async fn call(
    server: &Arc<McpServer>,
    caller: &Caller,
    headers: &HeaderMap,
    request: &Request<'_>,
    name: &str,
    tool: Option<ToolId>,
    arguments: Option<Value>,
    retry: asking::Retry,
) -> Outcome {
    if name.is_empty() {
        return request.error(rpc::INVALID_PARAMS, "tools/call needs params.name (a string)".into(), None);
    }
    let arguments = match arguments {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(a @ Value::Object(_)) => a,
        Some(_) => return request.error(rpc::INVALID_PARAMS, "params.arguments must be an object".into(), None),
    };
    let Some(tool) = tool else {
        let (message, suggestions) = super::lists::unknown_tool(server, caller, name);
        let data = json!({"suggestions": suggestions, "correlation_id": request.correlation_id});
        return request.error(rpc::INVALID_PARAMS, message, Some(data));
    };
    let meta = tool.meta();
    // The read-only kill switch answers before any protocol detail of a tool it refuses.
    if server.gate.refused_by_read_only(meta) {
        return request.denied(server, Denial::ReadOnlyMode { tool: meta.name });
    }
    if request.era.stateless
        && let Err(message) =
            headers::check_param_headers(server.gate.schemas().input_schema(meta), headers, &arguments)
    {
        return Outcome {
            detail: message.clone(),
            reply: Reply::error(StatusCode::BAD_REQUEST, request.id, rpc::HEADER_MISMATCH, &message, None),
            result: AuditOutcome::Denied,
        };
    }
    if let Some(outcome) = asking::missing_capabilities(server, request, meta) {
        return outcome;
    }
    let tasks_negotiated = super::tasks::negotiated(request.era.client_capabilities.as_ref());
    if request.era.stateless && meta.task_support == TaskSupport::Required && !tasks_negotiated {
        let message = format!("{} runs only as a task: declare the {} extension", meta.name, super::tasks::EXTENSION);
        let data = json!({"requiredCapabilities": super::tasks::required_capabilities(),
                          "correlation_id": request.correlation_id});
        return request.error(rpc::MISSING_CLIENT_CAPABILITY, message, Some(data));
    }
    // 2026-07-28: this round's answers, checked against the state the last round issued.
    let round = match request.era.stateless {
        true => match retry.round(server, caller, request, "tools/call", meta.name, &arguments).await {
            Ok(round) => Some(round),
            Err(outcome) => return outcome,
        },
        false => None,
    };
    let passed = match server.gate.pass(caller, meta, arguments).await {
        Ok(passed) => passed,
        Err(denial) => {
            // Counted apart from the RBAC refusals that share its -32003.
            if let Denial::NotRedeemable { why, .. } = &denial {
                crate::metrics::recall_refused(meta.name, why.label());
            }
            return request.denied_tool(server, denial, meta);
        }
    };
    // The ticket is spent from here on: if the call does not run to success, it burned.
    let consumed = passed.approval.is_some();
    if consumed {
        crate::metrics::approval(crate::metrics::ApprovalEvent::Consumed, meta.name);
    }
    let burned_unless_success = |outcome: Outcome| {
        use crate::metrics::BurnReason;
        match outcome.result {
            AuditOutcome::Success => {}
            _ if !consumed => {}
            AuditOutcome::Denied => crate::metrics::approval_burned(meta.name, BurnReason::Refused),
            _ => crate::metrics::approval_burned(meta.name, BurnReason::Failed),
        }
        outcome
    };
    let approved = passed
        .approval
        .map(|a| format!("approval {} by {}; ", a.id, a.reviewer.unwrap_or_default()))
        .unwrap_or_default();
    // A task-supporting tool, for a client that negotiated tasks: its handler may start one.
    let task_mode = match &round {
        Some(round) if meta.task_support != TaskSupport::Forbidden && tasks_negotiated => {
            Some(TaskMode::new(round, &request.listeners.cancellation))
        }
        _ => None,
    };
    let builder = ToolContext::builder(server.services.clone())
        .caller(caller.clone())
        .correlation_id(request.correlation_id.clone())
        .progress(request.listeners.progress.clone())
        .log(request.listeners.log.clone());
    let ctx = match (&task_mode, &round) {
        (Some(mode), _) => {
            builder.client(mode.client()).task(mode.starter.clone()).cancellation(mode.cancellation.clone())
        }
        (None, Some(round)) => builder
            .client(ClientRequests::new(round.channel.clone()))
            .cancellation(request.listeners.cancellation.clone()),
        (None, None) => {
            builder.client(request.listeners.client.clone()).cancellation(request.listeners.cancellation.clone())
        }
    }
    .build();
    if passed.confirm && round.is_none() && server.options.streams.plain_json_only {
        return asking::unconfirmable_without_streams(server, request, meta);
    }
    if passed.confirm
        && let Some(outcome) = asking::confirm(server, request, &ctx, meta, &passed.arguments, round.as_ref()).await
    {
        return burned_unless_success(outcome);
    }
    let approved = match passed.confirm {
        true => format!("{approved}confirmed by the client's user; "),
        false => approved,
    };
    if let (Some(mode), Some(round)) = (task_mode, round.clone()) {
        return super::task_call::drive(server, request, caller, tool, ctx, passed.arguments, approved, round, mode)
            .await;
    }
    burned_unless_success(match run_handler(server, request, tool, &ctx, passed.arguments, approved).await {
        Ok(outcome) => outcome,
        Err(asked) => asking::unanswered(server, request, round.as_ref(), asked),
    })
}

pub(super) async fn run_handler(
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
            "{}'s answer is {size} bytes, more than the {cap} one answer may carry: ask for less (a smaller `limit`, fewer `columns`, a narrower filter or scope) and page with `offset`",
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

//! tools/call, read top-down: [`tools_call`] decides how the call is answered (a stream, or
//! plain JSON with its progress on the session's channel), [`run_and_audit`] runs it and audits it,
//! [`call`] takes it through the steps of [`runner`] (protocol checks, gate, confirmation,
//! handler), as a task when the client negotiated tasks ([`task`]). [`streamed`] runs the
//! same [`run_and_audit`] in a task of its own and streams what it reports.

mod runner;
mod streamed;
mod task;

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use serde_json::Value;
use toolgate_domain::approvals::canonical_arguments;
use toolgate_domain::audit::{AuditEvent, TargetType};
use toolgate_domain::redact::{redacted, truncated, truncated_owned};
use toolgate_domain::targets::Targets;
use toolgate_domain::{Caller, ClientMethod, ProgressSink};
use toolgate_policy::OperationClass;

use super::asking;
use super::era::Era;
use super::jsonrpc as rpc;
use super::request::{Listeners, Outcome, Request};
use super::{McpServer, Reply};
use crate::registry::ToolId;

use streamed::progress_token;

/// How the call is answered: on a stream when the client asked to hear something while it
/// runs (progress, log lines, a handler's questions) and takes one; else plain JSON.
pub async fn tools_call(
    server: &Arc<McpServer>,
    caller: &Caller,
    headers: &HeaderMap,
    id: &Value,
    params: Option<Value>,
    era: &Era,
) -> Reply {
    // In a session, the call is registered: the client's `notifications/cancelled` fires it.
    let in_flight = match era.session() {
        Some(session) => match server.in_flight.register(&session.id, id, &server.shutdown) {
            Some(registered) => Some(registered),
            None => {
                let message = format!("request id {id} is already in flight in this session: use a new id");
                return Reply::error(StatusCode::CONFLICT, id, rpc::INVALID_REQUEST, &message, None);
            }
        },
        None => None,
    };
    let token = progress_token(params.as_ref());
    let log_level = era.log_level();
    let ring = era.session().map(|s| s.ring.clone());
    // A session whose client takes questions answers its calls on a stream they can go out on
    // (still a plain JSON body when the handler asks nothing).
    let ask_session = era.session().map(|s| s.id.clone()).filter(|_| {
        let declared = era.client_capabilities();
        ClientMethod::ALL.iter().any(|m| declared.and_then(|c| c.get(m.capability())).is_some_and(Value::is_object))
    });
    let streaming = !server.options.streams.plain_json_only;
    if (token.is_some() || log_level.is_some() || ask_session.is_some())
        && streaming
        && super::headers::accepts_sse(headers)
    {
        let permit = match server.streams.admit(&caller.principal.name, super::admission::StreamKind::Call) {
            Ok(permit) => permit,
            Err(cap) => return cap.refusal(server, id),
        };
        // SEP-1699 (2025-11-25): a resumable stream starts with an id and nothing else.
        let priming = era.primes_streams();
        let wants = streamed::Wants { progress: token, log_level, ask_session, ring, priming, permit };
        let (runner_server, runner_caller, headers, runner_id, runner_era) =
            (server.clone(), caller.clone(), headers.clone(), id.clone(), era.clone());
        let run = move |listeners: Listeners| -> futures_util::future::BoxFuture<'static, Reply> {
            Box::pin(async move {
                run_and_audit(&runner_server, &runner_caller, &headers, &runner_id, params, &runner_era, listeners)
                    .await
            })
        };
        return streamed::answer_streaming(
            server.clone(),
            caller.clone(),
            id.clone(),
            era.clone(),
            wants,
            in_flight,
            run,
        )
        .await;
    }
    let cancellation = in_flight.as_ref().map_or_else(|| server.call_cancellation(), |r| r.cancellation.clone());
    // A progress token on a POST that takes no stream, in a session: the progress goes out on
    // the session's GET channel, where the client hears what the server sends unasked.
    let progress = match (token, ring) {
        (Some(token), Some(ring)) => streamed::progress_on_channel(ring, token),
        // Behind a buffering proxy: the call waits as a streamed one would, and its final
        // result carries what the progress would have said.
        (Some(_), None) if !streaming => ProgressSink::new(|_| {}),
        _ => ProgressSink::none(),
    };
    let listeners = Listeners { cancellation, progress, ..Listeners::default() };
    run_and_audit(server, caller, headers, id, params, era, listeners).await
}

/// The call, its audit row and its answer, with its listeners.
async fn run_and_audit(
    server: &Arc<McpServer>,
    caller: &Caller,
    headers: &HeaderMap,
    id: &Value,
    params: Option<Value>,
    era: &Era,
    mut listeners: Listeners,
) -> Reply {
    listeners.listing = super::lists::listing(server, caller, headers, era);
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
    let action = match tool {
        Some(tool) => format!("mcp.{}", tool.meta().name),
        None => format!("mcp.{}", truncated(&name, 128)),
    };
    // The agents the row is about: those the arguments name by id (a confined reader of the
    // audit log reads another principal's rows about its own agents).
    let about = match (&arguments, tool) {
        (Some(arguments), Some(_)) => Targets::of(arguments).agents,
        _ => vec![],
    };
    let named = runner::Named { name, tool, arguments, retry };
    let outcome = call(server, caller, headers, &request, named).await;
    crate::metrics::tool_call(tool, outcome.result);
    let mut event = AuditEvent::new(server.now_ms(), action, outcome.result)
        .by(caller)
        .detail(truncated_owned(outcome.detail, 1024))
        .correlation(request.correlation_id)
        .about_agents(about);
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

/// The steps of one call, each of which may end it.
async fn call(
    server: &Arc<McpServer>,
    caller: &Caller,
    headers: &HeaderMap,
    request: &Request<'_>,
    named: runner::Named,
) -> Outcome {
    let checked = match runner::checked(server, caller, headers, request, named).await {
        Ok(checked) => checked,
        Err(outcome) => return outcome,
    };
    let task_mode = task::TaskMode::for_call(&checked, &request.listeners.cancellation);
    let hooks = task_mode.as_ref().map(task::TaskMode::hooks);
    let mut prepared = match runner::prepare(server, caller, request, checked, hooks).await {
        Ok(prepared) => prepared,
        Err(outcome) => return outcome,
    };
    if let Some(outcome) = runner::confirmed(server, request, &mut prepared).await {
        return prepared.ticket.settle(outcome);
    }
    match task_mode {
        Some(mode) => task::drive(server, request, caller, prepared, mode).await,
        None => runner::run(server, request, prepared).await,
    }
}

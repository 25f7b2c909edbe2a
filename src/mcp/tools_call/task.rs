//! A call of a task-supporting tool from a client that negotiated the tasks extension: the
//! handler runs in a task of its own; if it ends first, the call is answered as any other; if
//! it starts a task (`ctx.task().start()`), the call is answered with the CreateTaskResult at
//! once and the handler's outcome goes into the task when it ends (and into a second audit
//! row).

use std::sync::{Arc, OnceLock};

use axum::http::StatusCode;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use toolgate_domain::audit::{AuditEvent, AuditOutcome};
use toolgate_domain::{CancellationToken, ClientRequests, TaskStarter};

use super::super::asking::{self, Round};
use super::super::request::{Listeners, Outcome, Request};
use super::super::tasks::{Switch, TaskChannel};
use super::super::{McpServer, Payload, Reply, jsonrpc as rpc};
use super::runner::{Checked, Prepared, TaskHooks, run_handler};
use crate::registry::ToolId;

/// What a task-mode call's handler is given: its questions' channel, how it starts the task,
/// and a cancellation `tasks/cancel` fires.
pub struct TaskMode {
    pub switch: Arc<Switch>,
    pub starter: TaskStarter,
    pub cancellation: CancellationToken,
    starts: mpsc::UnboundedReceiver<oneshot::Sender<bool>>,
}

impl TaskMode {
    pub fn new(round: &Round, parent: &CancellationToken) -> Self {
        let (tx, starts) = mpsc::unbounded_channel::<oneshot::Sender<bool>>();
        let starter = TaskStarter::new(move || {
            let tx = tx.clone();
            Box::pin(async move {
                let (ack, started) = oneshot::channel();
                if tx.send(ack).is_err() {
                    return false;
                }
                started.await.unwrap_or(false)
            })
        });
        let switch = Arc::new(Switch { before: round.channel.clone(), after: OnceLock::new() });
        Self { switch, starter, cancellation: parent.child_token(), starts }
    }

    /// A task-supporting tool, for a client that negotiated tasks: its handler may start one.
    pub fn for_call(checked: &Checked, parent: &CancellationToken) -> Option<Self> {
        use toolgate_domain::catalogue::TaskSupport;
        let round = checked.round.as_ref()?;
        let supported = checked.tool.meta().task_support != TaskSupport::Forbidden && checked.tasks_negotiated;
        supported.then(|| Self::new(round, parent))
    }

    /// What the handler's context is built with.
    pub fn hooks(&self) -> TaskHooks {
        TaskHooks {
            client: ClientRequests::new(self.switch.clone()),
            starter: self.starter.clone(),
            cancellation: self.cancellation.clone(),
        }
    }
}

/// The handler's outcome as a task's: the tool result, or the JSON-RPC error.
fn task_outcome(outcome: Outcome) -> Result<Value, Value> {
    let text = outcome.reply.body.map(Payload::into_text).unwrap_or_default();
    let mut message: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    match message.get_mut("result").map(Value::take) {
        Some(mut result) => {
            if let Some(obj) = result.as_object_mut() {
                obj.remove("resultType");
                obj.remove("_meta");
            }
            Ok(result)
        }
        None => Err(message.get_mut("error").map(Value::take).unwrap_or_else(
            || json!({"code": rpc::INTERNAL_ERROR, "message": "the tool's handler ended without an answer"}),
        )),
    }
}

/// Runs a task-mode call's handler in a task of its own: the call answers with the handler's
/// outcome if it ends before starting a task, or with the task's envelope once it starts one
/// (the outcome is then recorded in the task, and audited, when the handler ends).
pub async fn drive(
    server: &Arc<McpServer>,
    request: &Request<'_>,
    caller: &toolgate_domain::Caller,
    prepared: Prepared,
    mut mode: TaskMode,
) -> Outcome {
    let (id, era, correlation_id) = (request.id.clone(), request.era.clone(), request.correlation_id.clone());
    let Prepared { tool, ctx, arguments, approved, round, .. } = prepared;
    let handler_server = server.clone();
    let mut handler = tokio::spawn(async move {
        let request = Request { id: &id, era: &era, correlation_id, listeners: Listeners::default() };
        match run_handler(&handler_server, &request, tool, &ctx, arguments, approved).await {
            Ok(outcome) => outcome,
            Err(asked) => asking::unanswered(&handler_server, &request, round.as_ref(), asked),
        }
    });
    let failed = |why: String| Outcome {
        reply: Reply::error(StatusCode::OK, request.id, rpc::INTERNAL_ERROR, "the call failed inside the server", None),
        result: AuditOutcome::Failure,
        detail: why,
    };
    loop {
        tokio::select! {
            ended = &mut handler => return ended.unwrap_or_else(|e| failed(e.to_string())),
            Some(ack) = mode.starts.recv() => {
                if mode.switch.after.get().is_some() {
                    let _ = ack.send(true);
                    continue;
                }
                let now = server.now_ms();
                let (task_id, envelope) = server.tasks.create(&caller.principal.name, mode.cancellation.clone(), now);
                let channel = TaskChannel {
                    tasks: server.tasks.clone(),
                    id: task_id.clone(),
                    capabilities: request.era.client_capabilities().cloned().unwrap_or(Value::Null),
                    cancellation: mode.cancellation.clone(),
                    clock: server.services().clock().clone(),
                };
                let _ = mode.switch.after.set(Arc::new(channel));
                let _ = ack.send(true);
                finish_later(server.clone(), caller.clone(), tool, task_id.clone(), request.correlation_id.clone(), handler);
                let mut result = envelope;
                result["resultType"] = json!("task");
                return Outcome {
                    reply: Reply::json(StatusCode::OK, rpc::result(request.id, &result)),
                    result: AuditOutcome::Pending,
                    detail: format!("task {task_id} started"),
                };
            }
        }
    }
}

/// Waits for the handler of a started task, records its outcome in the task and audits it.
fn finish_later(
    server: Arc<McpServer>,
    caller: toolgate_domain::Caller,
    tool: ToolId,
    task_id: String,
    correlation_id: String,
    handler: tokio::task::JoinHandle<Outcome>,
) {
    tokio::spawn(async move {
        let (outcome, result, detail) = match handler.await {
            Ok(outcome) => {
                let (result, detail) = (outcome.result, outcome.detail.clone());
                (task_outcome(outcome), result, detail)
            }
            Err(e) => {
                tracing::error!(task = %task_id, "a task's handler failed: {e}");
                let error =
                    json!({"code": rpc::INTERNAL_ERROR, "message": "the tool's handler failed inside the server"});
                (Err(error), AuditOutcome::Failure, e.to_string())
            }
        };
        server.tasks.finish(&task_id, outcome, server.now_ms());
        let action = format!("mcp.{}", tool.meta().name);
        server.record(
            AuditEvent::new(server.now_ms(), action, result)
                .by(&caller)
                .detail(format!("task {task_id}: {detail}"))
                .correlation(correlation_id),
        );
    });
}

//! The 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`): a task-supporting
//! tool's handler that starts a task (`ctx.task().start()`) has its call answered at once with
//! a CreateTaskResult and runs on; `tasks/get` polls it (its result or error inlined once it
//! ends), `tasks/update` answers the questions it parked on, `tasks/cancel` stops it. Tasks
//! live in this process for [`TASK_TTL_MS`] after their last change; the work they wrap (an
//! execution) is durable on its own and fetchable by its id.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Map, Value, json};
use tokio::sync::oneshot;
use toolgate_domain::client::{AskFuture, ClientChannel};
use toolgate_domain::secrets::random_hex;
use toolgate_domain::{AskError, CancellationToken, ClientMethod};

use axum::http::StatusCode;
use toolgate_domain::Caller;

use super::input_required::RoundChannel;
use super::jsonrpc as rpc;
use super::{McpServer, Reply};

pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// How long a task stays readable after its last change.
pub const TASK_TTL_MS: i64 = 3_600_000;
/// How often a client should poll `tasks/get`.
pub const POLL_INTERVAL_MS: u64 = 500;

/// Whether the request's capabilities negotiate the extension.
pub fn negotiated(capabilities: Option<&Value>) -> bool {
    capabilities.and_then(|c| c.get("extensions")).and_then(|e| e.get(EXTENSION)).is_some_and(Value::is_object)
}

/// `requiredCapabilities` for a client without the extension.
pub fn required_capabilities() -> Value {
    json!({"extensions": {EXTENSION: {}}})
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::InputRequired => "input_required",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    fn terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }
}

struct Task {
    principal: String,
    status: Status,
    created_ms: i64,
    updated_ms: i64,
    /// The tool's result (completed) or the JSON-RPC error (failed).
    outcome: Option<Result<Value, Value>>,
    /// Questions the handler waits on: their requests, and where the answers go.
    open: Map<String, Value>,
    waiting: HashMap<String, oneshot::Sender<Value>>,
    cancellation: CancellationToken,
}

/// No task of the caller's has this id (another principal's reads alike).
#[derive(Debug, PartialEq, Eq)]
pub struct UnknownTask;

#[derive(Default)]
pub struct Tasks {
    tasks: Mutex<HashMap<String, Task>>,
}

fn iso(ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(at).to_string()
}

impl Tasks {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Task>> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a working task; it is readable before the call that made it answers.
    pub fn create(&self, principal: &str, cancellation: CancellationToken, now_ms: i64) -> (String, Value) {
        let id = format!("tsk-{}", random_hex::<16>());
        let task = Task {
            principal: principal.into(),
            status: Status::Working,
            created_ms: now_ms,
            updated_ms: now_ms,
            outcome: None,
            open: Map::new(),
            waiting: HashMap::new(),
            cancellation,
        };
        let mut tasks = self.lock();
        tasks.retain(|_, t| !(t.status.terminal() && now_ms - t.updated_ms > TASK_TTL_MS));
        let envelope = envelope(&id, &task);
        tasks.insert(id.clone(), task);
        (id, envelope)
    }

    /// The handler ended: its result, or a protocol error. A cancelled task stays cancelled.
    pub fn finish(&self, id: &str, outcome: Result<Value, Value>, now_ms: i64) {
        if let Some(task) = self.lock().get_mut(id)
            && !task.status.terminal()
        {
            task.status = if outcome.is_ok() { Status::Completed } else { Status::Failed };
            task.outcome = Some(outcome);
            task.open.clear();
            task.waiting.clear();
            task.updated_ms = now_ms;
        }
    }

    /// Parks the task on a question; the receiver gets the client's answer.
    fn park(&self, id: &str, key: &str, request: Value, now_ms: i64) -> Option<oneshot::Receiver<Value>> {
        let mut tasks = self.lock();
        let task = tasks.get_mut(id).filter(|t| !t.status.terminal())?;
        let (answer, receiver) = oneshot::channel();
        task.open.insert(key.into(), request);
        task.waiting.insert(key.into(), answer);
        task.status = Status::InputRequired;
        task.updated_ms = now_ms;
        Some(receiver)
    }

    /// `tasks/update`: hands each answer to the question it names; the task works again once
    /// none is open. Answers to questions not asked are ignored.
    pub fn take_responses(
        &self,
        principal: &str,
        id: &str,
        responses: Map<String, Value>,
        now_ms: i64,
    ) -> Result<(), UnknownTask> {
        let mut tasks = self.lock();
        let task = tasks.get_mut(id).filter(|t| t.principal == principal).ok_or(UnknownTask)?;
        for (key, answer) in responses {
            if let Some(waiting) = task.waiting.remove(&key) {
                task.open.remove(&key);
                let _ = waiting.send(answer);
            }
        }
        if task.status == Status::InputRequired && task.open.is_empty() {
            task.status = Status::Working;
        }
        task.updated_ms = now_ms;
        Ok(())
    }

    /// `tasks/cancel`: stops a running task (idempotent on an ended one).
    pub fn cancel(&self, principal: &str, id: &str, now_ms: i64) -> Result<(), UnknownTask> {
        let mut tasks = self.lock();
        let task = tasks.get_mut(id).filter(|t| t.principal == principal).ok_or(UnknownTask)?;
        if !task.status.terminal() {
            task.status = Status::Cancelled;
            task.open.clear();
            task.waiting.clear();
            task.updated_ms = now_ms;
            task.cancellation.cancel();
        }
        Ok(())
    }

    /// `tasks/get`: the task, with its result, error or open questions.
    pub fn detail(&self, principal: &str, id: &str) -> Result<Value, UnknownTask> {
        let tasks = self.lock();
        let task = tasks.get(id).filter(|t| t.principal == principal).ok_or(UnknownTask)?;
        let mut detail = envelope(id, task);
        detail["resultType"] = json!("complete");
        match (&task.outcome, task.status) {
            (Some(Ok(result)), Status::Completed) => detail["result"] = result.clone(),
            (Some(Err(error)), Status::Failed) => detail["error"] = error.clone(),
            (_, Status::InputRequired) => detail["inputRequests"] = Value::Object(task.open.clone()),
            _ => {}
        }
        Ok(detail)
    }
}

/// Which of the tasks methods a request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskMethod {
    Get,
    Update,
    Cancel,
}

/// `tasks/get`, `tasks/update` and `tasks/cancel`, for a client that negotiated the extension.
pub fn answer_tasks_method(
    server: &McpServer,
    caller: &Caller,
    id: &Value,
    method: TaskMethod,
    params: Option<&Value>,
    capabilities: Option<&Value>,
) -> Reply {
    let error = |status: StatusCode, code: i64, message: String, data: Value| {
        Reply::error(status, id, code, &message, Some(data))
    };
    if !negotiated(capabilities) {
        let message = format!("tasks/* need the {EXTENSION} extension in _meta clientCapabilities.extensions");
        return error(
            StatusCode::BAD_REQUEST,
            rpc::MISSING_CLIENT_CAPABILITY,
            message,
            json!({"requiredCapabilities": required_capabilities()}),
        );
    }
    let Some(task_id) = params.and_then(|p| p.get("taskId")).and_then(Value::as_str) else {
        return error(
            StatusCode::BAD_REQUEST,
            rpc::INVALID_PARAMS,
            "params.taskId (a string) is required".into(),
            json!({}),
        );
    };
    let principal = caller.principal.name.as_str();
    let now = server.services().clock().now_ms();
    let done = match method {
        TaskMethod::Get => server.tasks.detail(principal, task_id),
        TaskMethod::Cancel => server.tasks.cancel(principal, task_id, now).map(|()| json!({"resultType": "complete"})),
        TaskMethod::Update => match params.and_then(|p| p.get("inputResponses")) {
            Some(Value::Object(responses)) => server
                .tasks
                .take_responses(principal, task_id, responses.clone(), now)
                .map(|()| json!({"resultType": "complete"})),
            _ => {
                let message =
                    "params.inputResponses must be an object: each key of the task's inputRequests, with its result";
                return error(StatusCode::BAD_REQUEST, rpc::INVALID_PARAMS, message.into(), json!({}));
            }
        },
    };
    match done {
        Ok(result) => Reply::json(StatusCode::OK, rpc::result(id, &result)),
        Err(UnknownTask) => error(
            StatusCode::BAD_REQUEST,
            rpc::INVALID_PARAMS,
            format!("unknown taskId `{}`", task_id.chars().take(64).collect::<String>()),
            json!({"remediation": "use a taskId a tools/call of yours returned; tasks are kept an hour after they last changed"}),
        ),
    }
}

/// The task's fields every answer about it carries.
fn envelope(id: &str, task: &Task) -> Value {
    json!({
        "taskId": id,
        "status": task.status.label(),
        "createdAt": iso(task.created_ms),
        "lastUpdatedAt": iso(task.updated_ms),
        "ttlMs": TASK_TTL_MS,
        "pollIntervalMs": POLL_INTERVAL_MS,
    })
}

/// A running task's way to its client: a question parks the task until `tasks/update`.
pub struct TaskChannel {
    pub tasks: Arc<Tasks>,
    pub id: String,
    pub capabilities: Value,
    pub cancellation: CancellationToken,
    pub clock: toolgate_domain::Clock,
}

impl ClientChannel for TaskChannel {
    fn supports(&self, method: ClientMethod) -> bool {
        self.capabilities.get(method.capability()).is_some_and(Value::is_object)
    }

    fn ask<'a>(&'a self, key: &'a str, method: ClientMethod, params: Value) -> AskFuture<'a> {
        Box::pin(async move {
            let request = json!({"method": method.method(), "params": params});
            let Some(answer) = self.tasks.park(&self.id, key, request, self.clock.now_ms()) else {
                return Err(AskError::Cancelled);
            };
            // A question nobody answers does not hold the task (and its handler) forever.
            let patience = std::time::Duration::from_millis(TASK_TTL_MS as u64);
            tokio::select! {
                answer = answer => match answer {
                    Ok(answer) if answer.is_object() => Ok(answer),
                    Ok(_) => Err(AskError::Malformed { key: key.into(), why: "an answer is the request's result object".into() }),
                    Err(_) => Err(AskError::Cancelled),
                },
                _ = self.cancellation.cancelled() => Err(AskError::Cancelled),
                _ = tokio::time::sleep(patience) => {
                    Err(AskError::TimedOut { method: method.method(), seconds: patience.as_secs() })
                }
            }
        })
    }
}

/// A task-supporting call's questions: ordinary `input_required` rounds until the handler
/// starts its task, then the task's own.
pub struct Switch {
    pub before: Arc<RoundChannel>,
    pub after: OnceLock<Arc<TaskChannel>>,
}

impl ClientChannel for Switch {
    fn supports(&self, method: ClientMethod) -> bool {
        self.before.supports(method)
    }

    fn ask<'a>(&'a self, key: &'a str, method: ClientMethod, params: Value) -> AskFuture<'a> {
        match self.after.get() {
            Some(task) => task.ask(key, method, params),
            None => self.before.ask(key, method, params),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_parks_on_questions_and_answers_only_its_principal() {
        let tasks = Tasks::default();
        let (id, created) = tasks.create("alice", CancellationToken::new(), 0);
        assert_eq!(created["status"], "working");
        assert!(created["createdAt"].as_str().unwrap().starts_with("1970-01-01T00:00:00"));
        let first = tasks.park(&id, "a", json!({"method": "elicitation/create"}), 1).unwrap();
        let _second = tasks.park(&id, "b", json!({"method": "elicitation/create"}), 1).unwrap();
        assert_eq!(tasks.detail("bob", &id), Err(UnknownTask), "another principal's task reads as unknown");
        let mut partial = Map::new();
        partial.insert("a".into(), json!({"action": "accept"}));
        tasks.take_responses("alice", &id, partial, 2).unwrap();
        let detail = tasks.detail("alice", &id).unwrap();
        assert_eq!(detail["status"], "input_required");
        assert_eq!(detail["inputRequests"].as_object().unwrap().keys().collect::<Vec<_>>(), vec!["b"]);
        assert_eq!(first.blocking_recv().unwrap(), json!({"action": "accept"}));
        tasks.cancel("alice", &id, 3).unwrap();
        tasks.finish(&id, Ok(json!({"content": []})), 4);
        assert_eq!(tasks.detail("alice", &id).unwrap()["status"], "cancelled", "a cancelled task stays cancelled");
        assert_eq!(tasks.cancel("alice", &id, 5), Ok(()), "cancelling an ended task is an ack");
    }
}

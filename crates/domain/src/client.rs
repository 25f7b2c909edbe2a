//! What a handler may ask the client while it runs: a person's answer (elicitation), a
//! model's completion (sampling) or the client's roots. The handler asks under a key and
//! awaits the answer; how the question travels depends on the protocol era, which the
//! handler never sees:
//!
//! - handshake era: a request on the call's stream, answered by the client's POST;
//! - 2026-07-28: the call ends with `input_required` naming every question still open, and
//!   the client calls again with the answers, so the handler runs again from the start and
//!   finds, under the same keys, what was answered before.
//!
//! A handler therefore asks everything it needs before it changes anything.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

/// A request the server may send the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientMethod {
    Elicitation,
    Sampling,
    Roots,
}

impl ClientMethod {
    pub const ALL: [ClientMethod; 3] = [ClientMethod::Elicitation, ClientMethod::Sampling, ClientMethod::Roots];

    /// The JSON-RPC method.
    pub fn method(self) -> &'static str {
        match self {
            ClientMethod::Elicitation => "elicitation/create",
            ClientMethod::Sampling => "sampling/createMessage",
            ClientMethod::Roots => "roots/list",
        }
    }

    /// The client capability that admits it.
    pub fn capability(self) -> &'static str {
        match self {
            ClientMethod::Elicitation => "elicitation",
            ClientMethod::Sampling => "sampling",
            ClientMethod::Roots => "roots",
        }
    }

    pub fn from_method(method: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.method() == method)
    }
}

/// Why a question got no answer.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AskError {
    /// The client did not declare the capability, or this call has no way to reach it.
    #[error("this call needs the client's `{}` capability, which the client did not declare", .0.capability())]
    Unsupported(ClientMethod),
    /// 2026-07-28: the answer is not in this request; the call ends with `input_required`.
    #[error("waiting for the client's answer")]
    InputRequired,
    /// The answer the client sent is not the shape the request asks for.
    #[error("the answer to `{key}` is malformed: {why}")]
    Malformed { key: String, why: String },
    /// The client answered with a JSON-RPC error.
    #[error("the client refused {method}: {message}")]
    Refused { method: &'static str, message: String },
    #[error("the client did not answer {method} within {seconds} s")]
    TimedOut { method: &'static str, seconds: u64 },
    /// The call was cancelled (the client went away or the server is stopping).
    #[error("the call was cancelled while waiting for the client")]
    Cancelled,
}

pub type AskFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, AskError>> + Send + 'a>>;

/// How the server reaches the client during one call (one per protocol era).
pub trait ClientChannel: Send + Sync {
    fn supports(&self, method: ClientMethod) -> bool;
    /// Asks `method` with `params` under `key` (unique within the call); resolves to the
    /// client's result object.
    fn ask<'a>(&'a self, key: &'a str, method: ClientMethod, params: Value) -> AskFuture<'a>;
}

/// The channel a handler reaches through `ctx.client()`; without one every question is
/// [`AskError::Unsupported`].
#[derive(Clone, Default)]
pub struct ClientRequests(Option<Arc<dyn ClientChannel>>);

impl std::fmt::Debug for ClientRequests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "ClientRequests(open)" } else { "ClientRequests(none)" })
    }
}

impl ClientRequests {
    pub fn new(channel: Arc<dyn ClientChannel>) -> Self {
        Self(Some(channel))
    }

    pub fn supports(&self, method: ClientMethod) -> bool {
        self.0.as_ref().is_some_and(|c| c.supports(method))
    }

    pub async fn ask(&self, key: &str, method: ClientMethod, params: Value) -> Result<Value, AskError> {
        match &self.0 {
            Some(channel) if channel.supports(method) => channel.ask(key, method, params).await,
            _ => Err(AskError::Unsupported(method)),
        }
    }

    /// `elicitation/create` in form mode: `message` and the flat object schema of the answer.
    /// Resolves to the client's `{action, content?}`.
    pub async fn elicit(&self, key: &str, message: &str, requested_schema: Value) -> Result<Elicited, AskError> {
        let params = serde_json::json!({"mode": "form", "message": message, "requestedSchema": requested_schema});
        let answer = self.ask(key, ClientMethod::Elicitation, params).await?;
        Elicited::parse(key, &answer)
    }
}

/// A person's answer to an elicitation.
#[derive(Clone, Debug, PartialEq)]
pub struct Elicited {
    /// `accept`, `decline` or `cancel`.
    pub action: ElicitAction,
    /// The form's values when accepted.
    pub content: Option<serde_json::Map<String, Value>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElicitAction {
    Accept,
    Decline,
    Cancel,
}

impl ElicitAction {
    pub fn as_str(self) -> &'static str {
        match self {
            ElicitAction::Accept => "accept",
            ElicitAction::Decline => "decline",
            ElicitAction::Cancel => "cancel",
        }
    }
}

impl Elicited {
    pub fn parse(key: &str, answer: &Value) -> Result<Self, AskError> {
        let malformed = |why: &str| AskError::Malformed { key: key.to_string(), why: why.to_string() };
        let action = match answer.get("action").and_then(Value::as_str) {
            Some("accept") => ElicitAction::Accept,
            Some("decline") => ElicitAction::Decline,
            Some("cancel") => ElicitAction::Cancel,
            _ => return Err(malformed("`action` must be \"accept\", \"decline\" or \"cancel\"")),
        };
        let content = match answer.get("content") {
            None | Some(Value::Null) => None,
            Some(Value::Object(map)) => Some(map.clone()),
            Some(_) => return Err(malformed("`content` must be an object")),
        };
        Ok(Self { action, content })
    }
}

type Start = dyn Fn() -> Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync;

/// How a task-supporting tool's handler becomes a task (2026-07-28 tasks extension): once
/// `start()` returns true, the call has been answered with a task the client polls
/// (`tasks/get`), and the handler runs on; a question asked after that parks the task
/// (`input_required`) until the client answers with `tasks/update`, while one asked before is
/// an ordinary `input_required` round. `false`: the call is not a task (the client did not
/// negotiate the extension, or another era), and the handler simply answers it.
#[derive(Clone, Default)]
pub struct TaskStarter(Option<Arc<Start>>);

impl std::fmt::Debug for TaskStarter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "TaskStarter(available)" } else { "TaskStarter(none)" })
    }
}

impl TaskStarter {
    pub fn new(start: impl Fn() -> Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(start)))
    }

    pub async fn start(&self) -> bool {
        match &self.0 {
            Some(start) => start().await,
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn without_a_channel_every_question_is_unsupported() {
        let none = ClientRequests::default();
        assert!(!none.supports(ClientMethod::Sampling));
        let asked = none.ask("k", ClientMethod::Sampling, json!({})).await;
        assert_eq!(asked, Err(AskError::Unsupported(ClientMethod::Sampling)));
        assert_eq!(ClientMethod::from_method("roots/list"), Some(ClientMethod::Roots));
    }

    #[test]
    fn elicitation_answers_are_checked() {
        let ok = Elicited::parse("k", &json!({"action": "accept", "content": {"name": "Alice"}})).unwrap();
        assert_eq!(ok.action, ElicitAction::Accept);
        assert_eq!(ok.content.unwrap()["name"], "Alice");
        assert!(matches!(Elicited::parse("k", &json!({"action": "maybe"})), Err(AskError::Malformed { .. })));
        assert!(matches!(Elicited::parse("k", &json!(12345)), Err(AskError::Malformed { .. })));
    }
}

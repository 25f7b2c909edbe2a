//! The handshake era's questions to the client: a handler's elicitation, sampling or roots
//! request goes out as a JSON-RPC request on its call's SSE stream; the client POSTs the
//! answer in the same session, and [`Outstanding::answer`] hands it to the waiting handler.
//! An answer from another session, or to a question nobody waits for any more, is dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use toolgate_domain::client::{AskFuture, ClientChannel};
use toolgate_domain::{AskError, CancellationToken, ClientMethod};

/// How long a handler waits for the client's answer (a person may be typing).
pub const ASK_TIMEOUT: Duration = Duration::from_secs(300);

struct Waiting {
    session: String,
    answer: oneshot::Sender<Result<Value, Value>>,
}

/// The questions sent and not yet answered, across sessions.
#[derive(Default)]
pub struct Outstanding {
    waiting: Mutex<HashMap<String, Waiting>>,
    sequence: AtomicU64,
}

impl Outstanding {
    /// Hands the client's answer to the handler waiting for it; false when none is (another
    /// session's id, a question given up on, or one never asked).
    pub fn deliver(&self, session: &str, id: &Value, outcome: Result<Value, Value>) -> bool {
        let Some(id) = id.as_str() else { return false };
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        if waiting.get(id).is_none_or(|w| w.session != session) {
            return false;
        }
        let w = waiting.remove(id).expect("just found");
        w.answer.send(outcome).is_ok()
    }

    fn open(self: &Arc<Self>, session: &str) -> (String, oneshot::Receiver<Result<Value, Value>>, Forget) {
        let id = format!("tgq-{:x}", self.sequence.fetch_add(1, Ordering::Relaxed));
        let (answer, receiver) = oneshot::channel();
        let waiting = Waiting { session: session.to_string(), answer };
        self.waiting.lock().unwrap_or_else(|e| e.into_inner()).insert(id.clone(), waiting);
        (id.clone(), receiver, Forget { outstanding: self.clone(), id })
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.waiting.lock().unwrap().len()
    }
}

/// Removes a question nobody will wait for any more (answered, timed out or cancelled).
struct Forget {
    outstanding: Arc<Outstanding>,
    id: String,
}

impl Drop for Forget {
    fn drop(&mut self) {
        self.outstanding.waiting.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.id);
    }
}

/// One call's way to its client: the call's stream, in its session.
pub struct SessionChannel {
    pub outstanding: Arc<Outstanding>,
    pub session: String,
    /// What the session's `initialize` declared.
    pub capabilities: Value,
    pub frames: mpsc::UnboundedSender<String>,
    pub cancellation: CancellationToken,
    pub timeout: Duration,
}

impl ClientChannel for SessionChannel {
    fn supports(&self, method: ClientMethod) -> bool {
        self.capabilities.get(method.capability()).is_some_and(Value::is_object)
    }

    fn ask<'a>(&'a self, _key: &'a str, method: ClientMethod, mut params: Value) -> AskFuture<'a> {
        Box::pin(async move {
            // Form mode is the only mode before 2025-11-25, where `mode` did not exist.
            if let Some(obj) = params.as_object_mut()
                && obj.get("mode").and_then(Value::as_str) == Some("form")
            {
                obj.remove("mode");
            }
            let (id, answer, _forget) = self.outstanding.open(&self.session);
            let request = json!({"jsonrpc": "2.0", "id": id, "method": method.method(), "params": params});
            if self.frames.send(request.to_string()).is_err() {
                return Err(AskError::Cancelled);
            }
            tokio::select! {
                answer = answer => match answer {
                    Ok(Ok(result)) if result.is_object() => Ok(result),
                    Ok(Ok(_)) => Err(AskError::Malformed { key: id, why: "the result is not an object".into() }),
                    Ok(Err(error)) => {
                        let message = error.get("message").and_then(Value::as_str).unwrap_or("no message").to_string();
                        Err(AskError::Refused { method: method.method(), message })
                    }
                    Err(_) => Err(AskError::Cancelled),
                },
                _ = self.cancellation.cancelled() => Err(AskError::Cancelled),
                _ = tokio::time::sleep(self.timeout) => {
                    Err(AskError::TimedOut { method: method.method(), seconds: self.timeout.as_secs() })
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel(outstanding: &Arc<Outstanding>, frames: mpsc::UnboundedSender<String>) -> SessionChannel {
        SessionChannel {
            outstanding: outstanding.clone(),
            session: "s1".into(),
            capabilities: json!({"sampling": {}}),
            frames,
            cancellation: CancellationToken::new(),
            timeout: Duration::from_secs(60),
        }
    }

    #[tokio::test]
    async fn an_answer_reaches_the_handler_only_from_its_own_session() {
        let outstanding = Arc::new(Outstanding::default());
        let (tx, mut rx) = mpsc::unbounded_channel();
        let channel = channel(&outstanding, tx);
        assert!(channel.supports(ClientMethod::Sampling) && !channel.supports(ClientMethod::Elicitation));
        let asking = tokio::spawn(async move { channel.ask("k", ClientMethod::Sampling, json!({})).await });
        let sent: Value = serde_json::from_str(&rx.recv().await.unwrap()).unwrap();
        assert_eq!(sent["method"], "sampling/createMessage");
        let id = sent["id"].clone();
        assert!(!outstanding.deliver("s2", &id, Ok(json!({}))), "another session's answer is dropped");
        assert!(outstanding.deliver("s1", &id, Ok(json!({"model": "m"}))));
        assert_eq!(asking.await.unwrap(), Ok(json!({"model": "m"})));
        assert_eq!(outstanding.len(), 0);
        assert!(!outstanding.deliver("s1", &id, Ok(json!({}))), "answered once");
    }

    #[tokio::test]
    async fn a_cancelled_or_refused_question_says_so_and_is_forgotten() {
        let outstanding = Arc::new(Outstanding::default());
        let (tx, mut rx) = mpsc::unbounded_channel();
        let channel = Arc::new(channel(&outstanding, tx));
        let asking = {
            let channel = channel.clone();
            tokio::spawn(async move { channel.ask("k", ClientMethod::Sampling, json!({})).await })
        };
        let sent: Value = serde_json::from_str(&rx.recv().await.unwrap()).unwrap();
        outstanding.deliver("s1", &sent["id"], Err(json!({"code": -1, "message": "user said no"})));
        let refused = asking.await.unwrap();
        assert_eq!(
            refused,
            Err(AskError::Refused { method: "sampling/createMessage", message: "user said no".into() })
        );
        let asking = {
            let channel = channel.clone();
            tokio::spawn(async move { channel.ask("k", ClientMethod::Sampling, json!({})).await })
        };
        rx.recv().await.unwrap();
        channel.cancellation.cancel();
        assert_eq!(asking.await.unwrap(), Err(AskError::Cancelled));
        assert_eq!(outstanding.len(), 0);
    }
}

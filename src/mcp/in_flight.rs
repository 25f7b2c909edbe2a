//! The tools/call requests being answered in handshake-era sessions, by session and request
//! id, so that the client's `notifications/cancelled` reaches the right handler (its
//! cancellation token fires) and a request id cannot be in flight twice in one session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use toolgate_domain::CancellationToken;

type Key = (String, String);

#[derive(Default)]
pub struct InFlight {
    requests: Mutex<HashMap<Key, CancellationToken>>,
}

/// One registered request; it leaves the registry when dropped (its call finished).
pub struct InFlightGuard {
    registry: Arc<InFlight>,
    key: Key,
    pub cancellation: CancellationToken,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.key);
    }
}

fn key(session_id: &str, request_id: &Value) -> Key {
    (session_id.to_string(), request_id.to_string())
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, CancellationToken>> {
        self.requests.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a request, its cancellation a child of `parent` (the server's shutdown);
    /// None when the same id is already in flight in the session.
    pub fn register(
        self: &Arc<Self>,
        session_id: &str,
        request_id: &Value,
        parent: &CancellationToken,
    ) -> Option<InFlightGuard> {
        let key = key(session_id, request_id);
        let cancellation = parent.child_token();
        let mut requests = self.lock();
        if requests.contains_key(&key) {
            return None;
        }
        requests.insert(key.clone(), cancellation.clone());
        Some(InFlightGuard { registry: self.clone(), key, cancellation })
    }

    /// Fires the request's cancellation token; false when no such request is in flight.
    pub fn cancel(&self, session_id: &str, request_id: &Value) -> bool {
        let found = self.lock().get(&key(session_id, request_id)).map(CancellationToken::cancel).is_some();
        crate::metrics::cancellations(if found { "cancelled" } else { "unknown" }, 1);
        found
    }

    /// The session ended: every call still running in it is cancelled (a handler waiting on
    /// the client's answer stops waiting; durable work goes on). How many there were.
    pub fn cancel_session(&self, session_id: &str) -> usize {
        let requests = self.lock();
        let in_session = requests.iter().filter(|((session, _), _)| session == session_id);
        let cancelled = in_session.map(|(_, token)| token.cancel()).count();
        crate::metrics::cancellations("session_ended", cancelled as u64);
        cancelled
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ending_a_session_cancels_its_calls_and_no_others() {
        let registry = Arc::new(InFlight::default());
        let parent = CancellationToken::new();
        let a = registry.register("s1", &json!(1), &parent).unwrap();
        let b = registry.register("s1", &json!("two"), &parent).unwrap();
        let other = registry.register("s2", &json!(1), &parent).unwrap();
        assert!(registry.register("s1", &json!(1), &parent).is_none(), "an id in flight twice");
        assert_eq!(registry.cancel_session("s1"), 2);
        assert!(a.cancellation.is_cancelled() && b.cancellation.is_cancelled());
        assert!(!other.cancellation.is_cancelled());
        drop((a, b));
        assert_eq!(registry.cancel_session("s1"), 0, "finished calls leave the registry");
    }
}

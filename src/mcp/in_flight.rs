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
        self.lock().get(&key(session_id, request_id)).map(CancellationToken::cancel).is_some()
    }
}

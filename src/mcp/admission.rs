//! Streamed answers held open at once, per principal and in all. A client that asks for a
//! stream past either cap is refused (429, -32012, with when to retry), never silently
//! answered without the stream it asked for; a live stream is never cut to make room.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::jsonrpc as rpc;
use super::{McpServer, Reply};

#[derive(Clone, Copy, Debug)]
pub struct StreamLimits {
    pub max_total: usize,
    pub max_per_principal: usize,
}

impl Default for StreamLimits {
    fn default() -> Self {
        Self { max_total: 1024, max_per_principal: 16 }
    }
}

/// Which cap refused a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamCap {
    Principal(usize),
    Server(usize),
}

impl StreamCap {
    /// 429 with -32012 and the A4 data: the client asked for a stream and none is free.
    pub fn refusal(self, server: &McpServer, id: &Value) -> Reply {
        let message = match self {
            StreamCap::Principal(n) => {
                format!("stream limit reached: this principal already holds {n} streamed answers")
            }
            StreamCap::Server(n) => {
                format!("stream limit reached: the server holds {n} streamed answers, the most it keeps")
            }
        };
        let data = json!({
            "correlation_id": server.correlation_id(),
            "retry_after_ms": STREAM_RETRY_AFTER_MS,
            "remediation": "retry shortly, or send the call without text/event-stream in Accept (the plain answer; poll for progress)",
        });
        Reply::error(StatusCode::TOO_MANY_REQUESTS, id, rpc::STREAM_LIMIT, &message, Some(data))
    }
}

/// When to retry a refused stream: streams end as their calls do, rarely within a second.
const STREAM_RETRY_AFTER_MS: u64 = 5_000;

#[derive(Default)]
struct Held {
    total: usize,
    by_principal: HashMap<String, usize>,
}

#[derive(Default)]
pub struct Admission {
    limits: StreamLimits,
    held: Mutex<Held>,
}

/// One admitted stream; its place is freed when dropped.
pub struct StreamPermit {
    admission: Arc<Admission>,
    principal: String,
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut held = self.admission.lock();
        held.total -= 1;
        if let Some(n) = held.by_principal.get_mut(&self.principal) {
            *n -= 1;
            if *n == 0 {
                held.by_principal.remove(&self.principal);
            }
        }
    }
}

impl Admission {
    pub fn new(limits: StreamLimits) -> Self {
        Self { limits, held: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn admit(self: &Arc<Self>, principal: &str) -> Result<StreamPermit, StreamCap> {
        let mut held = self.lock();
        if held.by_principal.get(principal).copied().unwrap_or(0) >= self.limits.max_per_principal {
            return Err(StreamCap::Principal(self.limits.max_per_principal));
        }
        if held.total >= self.limits.max_total {
            return Err(StreamCap::Server(self.limits.max_total));
        }
        held.total += 1;
        *held.by_principal.entry(principal.to_string()).or_default() += 1;
        Ok(StreamPermit { admission: self.clone(), principal: principal.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_per_principal_and_in_all_and_places_come_back() {
        let admission = Arc::new(Admission::new(StreamLimits { max_total: 2, max_per_principal: 1 }));
        let alice = admission.admit("alice").unwrap();
        assert_eq!(admission.admit("alice").err(), Some(StreamCap::Principal(1)));
        let _bob = admission.admit("bob").unwrap();
        assert_eq!(admission.admit("carol").err(), Some(StreamCap::Server(2)));
        drop(alice);
        assert!(admission.admit("alice").is_ok());
    }
}

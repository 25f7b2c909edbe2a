//! Streams held open at once, per principal and in all. A client that asks for a stream past
//! a cap is refused (429, -32012, with when to retry), never silently answered without the
//! stream it asked for; a live stream is never cut to make room. A principal's streamed calls
//! and its sessions' GET channels are counted apart (as the seeds do), so channels a client
//! or a proxy holds open cannot starve its calls; both count in the server's total.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::jsonrpc as rpc;
use super::{McpServer, Reply};

#[derive(Clone, Copy, Debug)]
pub struct StreamLimits {
    /// How long a stream lives on while its credential cannot be checked (the store is
    /// down) before it ends with `auth_unavailable`.
    pub auth_unavailable_grace: std::time::Duration,
    pub max_total: usize,
    /// Streamed calls (POST answers) per principal.
    pub max_per_principal: usize,
    /// GET channels (and resumes) per principal.
    pub max_channels_per_principal: usize,
    /// `--mcp-no-streaming`, for a deployment behind a buffering proxy: every answer is plain
    /// JSON, no session is minted, GET and DELETE are 405.
    pub plain_json_only: bool,
}

impl Default for StreamLimits {
    fn default() -> Self {
        Self {
            auth_unavailable_grace: std::time::Duration::from_secs(60),
            max_total: 1024,
            max_per_principal: 16,
            max_channels_per_principal: 16,
            plain_json_only: false,
        }
    }
}

/// What a stream carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamKind {
    Call,
    Channel,
}

/// Which cap refused a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamCap {
    Principal(usize, StreamKind),
    /// The server's cap, met by a request for a stream of this kind.
    Server(usize, StreamKind),
}

impl StreamCap {
    /// 429 with -32012 and the refusal envelope: the client asked for a stream and none is free.
    /// The metrics label of this refusal (one of `metrics::STREAM_REFUSAL_REASONS`).
    fn reason(self) -> &'static str {
        match self {
            StreamCap::Principal(_, StreamKind::Call) => "post_per_principal_cap",
            StreamCap::Principal(_, StreamKind::Channel) => "get_per_principal_cap",
            StreamCap::Server(_, StreamKind::Call) => "post_global_cap",
            StreamCap::Server(_, StreamKind::Channel) => "get_global_cap",
        }
    }

    pub fn refusal(self, server: &McpServer, id: &Value) -> Reply {
        crate::metrics::stream_refused(self.reason());
        let message = match self {
            StreamCap::Principal(n, StreamKind::Call) => {
                format!("stream limit reached: this principal already holds {n} streamed answers")
            }
            StreamCap::Principal(n, StreamKind::Channel) => {
                format!("stream limit reached: this principal already holds {n} GET streams")
            }
            StreamCap::Server(n, _) => {
                format!("stream limit reached: the server holds {n} streamed answers, the most it keeps")
            }
        };
        let remediation = match self {
            StreamCap::Principal(_, StreamKind::Channel) => {
                "close GET streams of sessions you no longer use (or DELETE those sessions), then retry"
            }
            _ => {
                "retry shortly, or send the call without text/event-stream in Accept (the plain answer; poll for progress)"
            }
        };
        let data = json!({
            "correlation_id": server.correlation_id(),
            "retry_after_ms": self.retry_after_ms(),
            "remediation": remediation,
        });
        Reply::error(StatusCode::TOO_MANY_REQUESTS, id, rpc::STREAM_LIMIT, &message, Some(data))
            .retry_after(self.retry_after_ms())
    }
}

/// When to retry a refused streamed call (the seeds' 30 s): a streamed slot is held until its
/// work finishes, so a shorter hint would only make refused clients storm the server.
const CALL_STREAM_RETRY_AFTER_MS: u64 = 30_000;
/// When to retry a refused GET channel: channels end with their sessions, or when a client
/// closes one it no longer reads.
const CHANNEL_RETRY_AFTER_MS: u64 = 5_000;

impl StreamCap {
    fn retry_after_ms(self) -> u64 {
        match self {
            StreamCap::Principal(_, StreamKind::Call) | StreamCap::Server(_, StreamKind::Call) => {
                CALL_STREAM_RETRY_AFTER_MS
            }
            StreamCap::Principal(_, StreamKind::Channel) | StreamCap::Server(_, StreamKind::Channel) => {
                CHANNEL_RETRY_AFTER_MS
            }
        }
    }
}

#[derive(Default)]
struct Held {
    total: usize,
    by_principal: HashMap<(StreamKind, String), usize>,
}

#[derive(Default)]
pub struct Admission {
    limits: StreamLimits,
    held: Mutex<Held>,
}

/// One admitted stream; its place is freed when dropped.
pub struct StreamPermit {
    admission: Arc<Admission>,
    key: (StreamKind, String),
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut held = self.admission.lock();
        held.total -= 1;
        if let Some(n) = held.by_principal.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                held.by_principal.remove(&self.key);
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

    /// Streams held open now: (streamed answers, GET channels).
    pub fn active(&self) -> (usize, usize) {
        let held = self.lock();
        held.by_principal.iter().fold((0, 0), |(calls, channels), ((kind, _), n)| match kind {
            StreamKind::Call => (calls + n, channels),
            StreamKind::Channel => (calls, channels + n),
        })
    }

    pub fn admit(self: &Arc<Self>, principal: &str, kind: StreamKind) -> Result<StreamPermit, StreamCap> {
        let mut held = self.lock();
        let cap = match kind {
            StreamKind::Call => self.limits.max_per_principal,
            StreamKind::Channel => self.limits.max_channels_per_principal,
        };
        let key = (kind, principal.to_string());
        if held.by_principal.get(&key).copied().unwrap_or(0) >= cap {
            return Err(StreamCap::Principal(cap, kind));
        }
        if held.total >= self.limits.max_total {
            return Err(StreamCap::Server(self.limits.max_total, kind));
        }
        held.total += 1;
        *held.by_principal.entry(key.clone()).or_default() += 1;
        Ok(StreamPermit { admission: self.clone(), key })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_per_principal_and_in_all_and_places_come_back() {
        let limits = StreamLimits {
            max_total: 3,
            max_per_principal: 1,
            max_channels_per_principal: 1,
            ..StreamLimits::default()
        };
        let admission = Arc::new(Admission::new(limits));
        let alice = admission.admit("alice", StreamKind::Call).unwrap();
        assert_eq!(admission.admit("alice", StreamKind::Call).err(), Some(StreamCap::Principal(1, StreamKind::Call)));
        let _channel = admission.admit("alice", StreamKind::Channel).expect("channels are counted apart");
        let _bob = admission.admit("bob", StreamKind::Call).unwrap();
        assert_eq!(admission.admit("carol", StreamKind::Call).err(), Some(StreamCap::Server(3, StreamKind::Call)));
        drop(alice);
        assert!(admission.admit("alice", StreamKind::Call).is_ok());
    }
}

//! The correlation id of an HTTP exchange: made once at the edge (`req-<hex ms>-<hex seq>`),
//! then held task-locally while the exchange is answered, so every audit row, every refusal
//! `correlation_id`, every log line and the `X-Correlation-Id` header agree without threading
//! it through each function. The edge, logging and MCP use this module; it uses none of them.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use toolgate_domain::Clock;

tokio::task_local! {
    static CORRELATION_ID: String;
}

/// Makes ids unique per server run: the time and a sequence number.
#[derive(Debug)]
pub struct Correlations {
    clock: Clock,
    sequence: AtomicU64,
}

impl Correlations {
    pub fn new(clock: Clock) -> Self {
        Self { clock, sequence: AtomicU64::new(0) }
    }

    /// A fresh id: `req-<hex ms>-<hex seq>`.
    pub fn fresh(&self) -> String {
        let seq = self.sequence.fetch_add(1, Ordering::Relaxed);
        // Sized once: "req-" and two u64s in hex fit in 36 bytes.
        let mut id = String::with_capacity(36);
        let _ = write!(id, "req-{:x}-{:x}", self.clock.now_ms(), seq);
        id
    }

    /// The current exchange's id, or a fresh one outside of any.
    pub fn current_or_fresh(&self) -> String {
        current().unwrap_or_else(|| self.fresh())
    }
}

/// The id of the exchange the current task is answering, if any.
pub fn current() -> Option<String> {
    CORRELATION_ID.try_with(String::clone).ok()
}

/// Runs `work` as part of the exchange `id`. A plain function, not an async one: an async fn
/// would keep `work` beside the future that runs it (twice its size).
pub fn scope<F: std::future::Future>(id: String, work: F) -> impl std::future::Future<Output = F::Output> {
    CORRELATION_ID.scope(id, work)
}

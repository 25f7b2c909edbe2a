//! Failed authentications, aggregated per source address: the first failure from an address
//! in a window is audited as it happens; the rest of that window are counted and audited as
//! one summary row when it closes. A flood of bad requests writes a handful of rows, and not
//! one failure goes uncounted.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use toolgate_domain::audit::{AuditEvent, AuditOutcome, AuditSink, TargetType};

use super::AppState;
use super::admission::Connection;

/// Sources tracked at once; past this, failures from new sources share one bucket.
const MAX_SOURCES: usize = 10_000;

#[derive(Debug)]
struct Window {
    opened_ms: i64,
    /// Failures counted after the first (which was audited on its own).
    more: u64,
}

/// What to audit for one failure.
#[derive(Debug, PartialEq, Eq)]
pub enum Noted {
    /// The first in its window: audit it now.
    First,
    /// Counted; the window's summary will say so.
    Counted,
}

/// One closed window with failures beyond its first.
#[derive(Debug, PartialEq, Eq)]
pub struct Summary {
    pub source: Option<IpAddr>,
    pub more: u64,
    pub window_ms: i64,
}

impl Summary {
    pub fn detail(&self) -> String {
        let source = self.source.map_or("other sources".to_string(), |s| s.to_string());
        format!(
            "aggregated: {} more failures from {source} within {} ms of the first (not recorded one by one)",
            self.more, self.window_ms
        )
    }
}

pub struct AuthFailures {
    window_ms: i64,
    /// `None`: the shared bucket of sources past [`MAX_SOURCES`].
    windows: Mutex<HashMap<Option<IpAddr>, Window>>,
}

impl AuthFailures {
    pub fn new(window_ms: i64) -> Self {
        Self { window_ms, windows: Mutex::default() }
    }

    pub fn window_ms(&self) -> i64 {
        self.window_ms
    }

    pub fn note(&self, source: Option<IpAddr>, now_ms: i64) -> Noted {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let key = if windows.len() >= MAX_SOURCES && !windows.contains_key(&source) { None } else { source };
        match windows.get_mut(&key) {
            Some(w) if now_ms - w.opened_ms < self.window_ms => {
                w.more += 1;
                Noted::Counted
            }
            // This failure opens a new window. One that closed but was not collected yet
            // hands its count on, so the next summary still counts it.
            _ => {
                let carried = windows.remove(&key).map_or(0, |w| w.more);
                windows.insert(key, Window { opened_ms: now_ms, more: carried });
                Noted::First
            }
        }
    }

    /// Removes the windows closed by `now_ms` (all of them with `everything`) and returns
    /// those with failures to summarize.
    pub fn collect(&self, now_ms: i64, everything: bool) -> Vec<Summary> {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let closed: Vec<Option<IpAddr>> = windows
            .iter()
            .filter(|(_, w)| everything || now_ms - w.opened_ms >= self.window_ms)
            .map(|(k, _)| *k)
            .collect();
        closed
            .into_iter()
            .filter_map(|k| windows.remove(&k).map(|w| (k, w)))
            .filter(|(_, w)| w.more > 0)
            .map(|(source, w)| Summary { source, more: w.more, window_ms: self.window_ms })
            .collect()
    }
}

/// Audits a failed authentication: the first from its source address in a window as it
/// happens, the rest as one counted summary when the window closes (a flood writes a handful
/// of rows).
pub fn audit_failure(state: &AppState, connection: &Connection, detail: &str) {
    crate::metrics::auth_failure();
    let source = connection.peer.map(|a| a.ip());
    let server = &state.mcp;
    let now = server.services().clock().now_ms();
    if state.auth_failures.note(source, now) == Noted::Counted {
        return;
    }
    let mut event =
        AuditEvent::new(now, "auth.failure", AuditOutcome::Denied).detail(detail).correlation(server.correlation_id());
    if let Some(source) = source {
        event = event.target(TargetType::ClientAddress, source.to_string());
    }
    server.services().audit().record(event);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_audits_its_first_failure_and_counts_the_rest() {
        let failures = AuthFailures::new(1000);
        let a: Option<IpAddr> = Some("10.0.0.1".parse().unwrap());
        let b: Option<IpAddr> = Some("10.0.0.2".parse().unwrap());
        assert_eq!(failures.note(a, 0), Noted::First);
        assert_eq!(failures.note(a, 10), Noted::Counted);
        assert_eq!(failures.note(a, 999), Noted::Counted);
        assert_eq!(failures.note(b, 500), Noted::First);
        assert_eq!(failures.collect(999, false), vec![], "nothing closed yet");
        assert_eq!(failures.collect(1000, false), vec![Summary { source: a, more: 2, window_ms: 1000 }]);
        assert_eq!(failures.note(a, 1001), Noted::First, "a new window");
        assert_eq!(failures.collect(1001, true), vec![], "b had one failure; a's new window none beyond its first");
    }

    #[test]
    fn a_late_collection_loses_no_count() {
        let failures = AuthFailures::new(1000);
        let a: Option<IpAddr> = Some("10.0.0.1".parse().unwrap());
        failures.note(a, 0);
        failures.note(a, 1);
        // The window closed but was not collected before the next failure came.
        assert_eq!(failures.note(a, 5000), Noted::First);
        assert_eq!(failures.collect(5000, true), vec![Summary { source: a, more: 1, window_ms: 1000 }]);
    }
}

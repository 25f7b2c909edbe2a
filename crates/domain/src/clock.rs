//! Time as the server sees it: the system clock, or a settable one so tests can expire
//! things without sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// Added to the system time, in milliseconds (tests move time forward with it).
    offset_ms: Arc<AtomicI64>,
    /// A clock that stands still unless advanced (tests that must not see real time pass).
    stopped: bool,
}

impl Clock {
    /// A clock at `at_ms` that only moves when advanced.
    pub fn stopped_at(at_ms: i64) -> Self {
        Self { offset_ms: Arc::new(AtomicI64::new(at_ms)), stopped: true }
    }

    /// Milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        let system = match self.stopped {
            true => 0,
            false => SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64),
        };
        system + self.offset_ms.load(Ordering::Relaxed)
    }

    pub fn now_secs(&self) -> i64 {
        self.now_ms() / 1000
    }

    pub fn advance_ms(&self, ms: i64) {
        self.offset_ms.fetch_add(ms, Ordering::Relaxed);
    }
}

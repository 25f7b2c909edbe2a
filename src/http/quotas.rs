//! Engine principals' quotas on this server (counted per replica, as the seeds count them):
//! requests per minute, a token bucket that refills continuously, and requests in flight, a
//! slot held until the answer is sent (a stream's until it ends). Past either, the request is
//! answered 429 with `-32010` and an honest `retry_after_ms`: the bucket's refill time, or the
//! seeds' fixed 250 ms for concurrency. People's requests are never counted here.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use toolgate_domain::Clock;
use toolgate_domain::engines::{EngineQuota, PrincipalKind};
use toolgate_store::EngineStore;

/// How long an engine principal's own limits are trusted before they are read again.
const LIMITS_TTL_MS: i64 = 5_000;
/// The seeds' backoff for a concurrency refusal.
pub const CONCURRENCY_RETRY_MS: u64 = 250;

/// Why a request is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaRefusal {
    Rate { retry_after_ms: u64 },
    Concurrency,
}

impl QuotaRefusal {
    pub fn message(self) -> &'static str {
        match self {
            QuotaRefusal::Rate { .. } => "per-principal rate limit exceeded",
            QuotaRefusal::Concurrency => "per-principal concurrency cap exceeded",
        }
    }

    pub fn retry_after_ms(self) -> u64 {
        match self {
            QuotaRefusal::Rate { retry_after_ms } => retry_after_ms,
            QuotaRefusal::Concurrency => CONCURRENCY_RETRY_MS,
        }
    }

    /// The `limit` label of the quota-exhaustion metric.
    pub fn label(self) -> &'static str {
        match self {
            QuotaRefusal::Rate { .. } => "rate",
            QuotaRefusal::Concurrency => "concurrency",
        }
    }
}

/// A request in flight: its slot is given back when this is dropped.
#[derive(Debug)]
pub struct Slot(Arc<AtomicU32>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

struct Bucket {
    limits: EngineQuota,
    limits_read_ms: i64,
    tokens: f64,
    refilled_ms: i64,
    in_flight: Arc<AtomicU32>,
}

pub struct Quotas {
    defaults: EngineQuota,
    engines: Arc<dyn EngineStore>,
    clock: Clock,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl Quotas {
    pub fn new(defaults: EngineQuota, engines: Arc<dyn EngineStore>, clock: Clock) -> Self {
        Quotas { defaults, engines, clock, buckets: Mutex::default() }
    }

    /// Its own limits, as the store says (policy.yaml's when it cannot answer: a store fault
    /// is not a reason to refuse work the defaults allow).
    async fn limits(&self, principal: &str) -> EngineQuota {
        match self.engines.engine(principal).await {
            Ok(Some(record)) => record.quota(self.defaults),
            Ok(None) => self.defaults,
            Err(e) => {
                tracing::warn!(principal, "an engine principal's quota could not be read, the defaults apply: {e}");
                self.defaults
            }
        }
    }

    /// Admits one request of `principal` (of `kind`): `None` for a person (never counted), a
    /// slot for an engine principal within its quota, else why not.
    pub async fn admit(&self, principal: &str, kind: PrincipalKind) -> Result<Option<Slot>, QuotaRefusal> {
        if kind != PrincipalKind::Engine {
            return Ok(None);
        }
        let now = self.clock.now_ms();
        let stale = {
            let buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
            buckets.get(principal).is_none_or(|b| now - b.limits_read_ms >= LIMITS_TTL_MS)
        };
        let fresh = match stale {
            true => Some(self.limits(principal).await),
            false => None,
        };
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = buckets.entry(principal.to_string()).or_insert_with(|| {
            let limits = fresh.unwrap_or(self.defaults);
            Bucket {
                limits,
                limits_read_ms: now,
                tokens: f64::from(limits.requests_per_minute),
                refilled_ms: now,
                in_flight: Arc::default(),
            }
        });
        if let Some(limits) = fresh {
            bucket.limits = limits;
            bucket.limits_read_ms = now;
        }
        let per_ms = f64::from(bucket.limits.requests_per_minute) / 60_000.0;
        let capacity = f64::from(bucket.limits.requests_per_minute);
        bucket.tokens = (bucket.tokens + (now - bucket.refilled_ms).max(0) as f64 * per_ms).min(capacity);
        bucket.refilled_ms = now;
        if bucket.in_flight.load(Ordering::Acquire) >= bucket.limits.concurrent_requests {
            return Err(QuotaRefusal::Concurrency);
        }
        if bucket.tokens < 1.0 {
            let retry_after_ms = ((1.0 - bucket.tokens) / per_ms).ceil().max(1.0) as u64;
            return Err(QuotaRefusal::Rate { retry_after_ms });
        }
        bucket.tokens -= 1.0;
        bucket.in_flight.fetch_add(1, Ordering::AcqRel);
        Ok(Some(Slot(bucket.in_flight.clone())))
    }
}

#[cfg(test)]
mod tests {
    use toolgate_domain::engines::NewEngine;
    use toolgate_store::SqliteStore;

    use super::*;

    async fn quotas(per_minute: u32, concurrent: u32) -> (Quotas, Clock) {
        let store = SqliteStore::open_in_memory().unwrap().repositories();
        store.credentials.put_principal("alice", &[], 0).await.unwrap();
        let new = NewEngine {
            principal_id: "engine:ci",
            display_name: "ci",
            owner: "alice",
            justification: "j",
            classification: "internal",
            requests_per_minute: Some(per_minute),
            concurrent_requests: Some(concurrent),
            created_by: "alice",
            now: 0,
        };
        store.engines.create_engine(new).await.unwrap().unwrap();
        let clock = Clock::stopped_at(1_800_000_000_000);
        let defaults = EngineQuota { requests_per_minute: 600, concurrent_requests: 8 };
        (Quotas::new(defaults, store.engines.clone(), clock.clone()), clock)
    }

    #[tokio::test]
    async fn the_rate_refills_continuously_and_says_when() {
        let (quotas, clock) = quotas(60, 100).await;
        for _ in 0..60 {
            quotas.admit("engine:ci", PrincipalKind::Engine).await.unwrap();
        }
        let refused = quotas.admit("engine:ci", PrincipalKind::Engine).await.unwrap_err();
        assert_eq!(refused, QuotaRefusal::Rate { retry_after_ms: 1000 }, "one a second at 60 a minute");
        clock.advance_ms(999);
        assert!(quotas.admit("engine:ci", PrincipalKind::Engine).await.is_err());
        clock.advance_ms(1);
        assert!(quotas.admit("engine:ci", PrincipalKind::Engine).await.is_ok());
        assert!(quotas.admit("alice", PrincipalKind::Person).await.unwrap().is_none(), "people are never counted");
    }

    #[tokio::test]
    async fn a_slot_is_held_until_its_request_ends() {
        let (quotas, _) = quotas(600, 2).await;
        let first = quotas.admit("engine:ci", PrincipalKind::Engine).await.unwrap();
        let _second = quotas.admit("engine:ci", PrincipalKind::Engine).await.unwrap();
        let refused = quotas.admit("engine:ci", PrincipalKind::Engine).await.unwrap_err();
        assert_eq!((refused, refused.retry_after_ms()), (QuotaRefusal::Concurrency, CONCURRENCY_RETRY_MS));
        drop(first);
        assert!(quotas.admit("engine:ci", PrincipalKind::Engine).await.is_ok());
    }
}

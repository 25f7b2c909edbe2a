//! An issuer's signing keys (its JWKS), fetched over HTTPS and kept. They are fetched again
//! when older than `max_age_ms`, and when a token names a key id the set lacks (the issuer
//! rotated its keys), but never more often than once per `min_refetch_ms`: a flood of tokens
//! with made-up key ids cannot turn into a flood of fetches. A set that cannot be fetched or
//! read is an error the caller answers 503 for, never a pass.

use std::sync::{Arc, Mutex};

use jsonwebtoken::jwk::JwkSet;
use toolgate_domain::Clock;

use crate::outbound::Outbound;

/// The largest key set read, in bytes.
const MAX_JWKS_BYTES: u64 = 256 * 1024;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeysUnavailable {
    #[error("the issuer's key set could not be fetched: {why}")]
    Unreachable { url: String, why: String },
    #[error("the issuer's key set at {url} is not a JWKS: {why}")]
    Invalid { url: String, why: String },
}

struct Fetched {
    keys: Arc<JwkSet>,
    at_ms: i64,
}

pub struct KeyCache {
    url: String,
    outbound: Outbound,
    clock: Clock,
    max_age_ms: i64,
    min_refetch_ms: i64,
    fetched: Mutex<Option<Fetched>>,
    /// Serializes fetches: one at a time, the others wait for its answer.
    fetching: tokio::sync::Mutex<()>,
}

impl KeyCache {
    pub fn new(url: impl Into<String>, outbound: Outbound, clock: Clock, max_age_ms: i64, min_refetch_ms: i64) -> Self {
        KeyCache {
            url: url.into(),
            outbound,
            clock,
            max_age_ms,
            min_refetch_ms,
            fetched: Mutex::default(),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// The kept set, if it may serve a token naming `kid` now.
    fn usable(&self, kid: &str, now: i64) -> Option<Arc<JwkSet>> {
        let fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
        let f = fetched.as_ref()?;
        let fresh = now - f.at_ms < self.max_age_ms;
        let knows = f.keys.find(kid).is_some();
        // A set lacking `kid` still answers (with "unknown key") until a refetch is allowed.
        (fresh && (knows || now - f.at_ms < self.min_refetch_ms)).then(|| f.keys.clone())
    }

    /// The key set to check a token naming `kid` against: the kept one, or a fresh fetch.
    pub async fn keys_for(&self, kid: &str) -> Result<Arc<JwkSet>, KeysUnavailable> {
        if let Some(keys) = self.usable(kid, self.clock.now_ms()) {
            return Ok(keys);
        }
        let _one_at_a_time = self.fetching.lock().await;
        // Another request may have fetched meanwhile.
        if let Some(keys) = self.usable(kid, self.clock.now_ms()) {
            return Ok(keys);
        }
        let body = self
            .outbound
            .get(&self.url, MAX_JWKS_BYTES)
            .await
            .map_err(|e| KeysUnavailable::Unreachable { url: self.url.clone(), why: e.to_string() })?;
        let fetched: JwkSet = serde_json::from_slice(&body)
            .map_err(|e| KeysUnavailable::Invalid { url: self.url.clone(), why: e.to_string() })?;
        let keys = Arc::new(fetched);
        *self.fetched.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(Fetched { keys: keys.clone(), at_ms: self.clock.now_ms() });
        Ok(keys)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::Router;
    use axum::routing::get;

    use super::*;

    /// A JWKS endpoint on a local port that counts its fetches and serves what `body` holds.
    async fn issuer(body: Arc<Mutex<String>>, served: Arc<AtomicUsize>) -> String {
        let app = Router::new().route(
            "/jwks",
            get(move || {
                served.fetch_add(1, Ordering::SeqCst);
                let text = body.lock().unwrap().clone();
                async move { text }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}/jwks")
    }

    fn set(kids: &[&str]) -> String {
        let keys: Vec<_> =
            kids.iter().map(|kid| serde_json::json!({"kty": "oct", "kid": kid, "k": "c2VjcmV0"})).collect();
        serde_json::json!({"keys": keys}).to_string()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keys_are_kept_refetched_for_a_new_kid_at_most_so_often_and_when_old() {
        let (body, served) = (Arc::new(Mutex::new(set(&["k1"]))), Arc::new(AtomicUsize::new(0)));
        let url = issuer(body.clone(), served.clone()).await;
        let clock = Clock::stopped_at(1_800_000_000_000);
        let cache = KeyCache::new(url, Outbound::default(), clock.clone(), 3_600_000, 60_000);
        assert!(cache.keys_for("k1").await.unwrap().find("k1").is_some());
        assert!(cache.keys_for("k1").await.is_ok());
        assert_eq!(served.load(Ordering::SeqCst), 1, "kept");
        *body.lock().unwrap() = set(&["k1", "k2"]);
        assert!(cache.keys_for("k2").await.unwrap().find("k2").is_none(), "too soon to fetch again");
        assert_eq!(served.load(Ordering::SeqCst), 1);
        clock.advance_ms(60_000);
        assert!(cache.keys_for("k2").await.unwrap().find("k2").is_some(), "a rotated key is fetched");
        for kid in ["made-up-1", "made-up-2", "made-up-3"] {
            assert!(cache.keys_for(kid).await.unwrap().find(kid).is_none());
        }
        assert_eq!(served.load(Ordering::SeqCst), 2, "made-up key ids cause no flood of fetches");
        clock.advance_ms(3_600_000);
        cache.keys_for("k1").await.unwrap();
        assert_eq!(served.load(Ordering::SeqCst), 3, "an old set is fetched again");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unreachable_or_unreadable_set_is_an_error_never_a_pass() {
        let clock = Clock::stopped_at(0);
        let nowhere = KeyCache::new("http://127.0.0.1:9/jwks", Outbound::default(), clock.clone(), 1000, 1000);
        assert!(matches!(nowhere.keys_for("k1").await, Err(KeysUnavailable::Unreachable { .. })));
        let (body, served) = (Arc::new(Mutex::new("<html>not keys</html>".to_string())), Arc::default());
        let garbage = KeyCache::new(issuer(body.clone(), served).await, Outbound::default(), clock.clone(), 1000, 1000);
        assert!(matches!(garbage.keys_for("k1").await, Err(KeysUnavailable::Invalid { .. })));
        *body.lock().unwrap() = "x".repeat(300 * 1024);
        assert!(garbage.keys_for("k1").await.is_err(), "a set past the size cap is not read");
    }
}

//! An authentication cache in front of a credential store: the hot path no longer asks the
//! database on every request. It can never outlive a revocation or an expiry by more than
//! its time to live: an entry is used for at most `ttl_ms` after it was read, a token past
//! its `expires_at` is never served from it, and every change made through this process
//! (revocation, rotation, a principal's removal or new roles) empties it at once. Another
//! replica's changes empty it as soon as the database tells of them (see [`crate::changes`]);
//! the console commands' (and a change whose notice was lost) are seen within `ttl_ms`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use toolgate_domain::secrets::hash_secret;
use toolgate_domain::tokens::{Authentication, NewToken, PrincipalRecord, TokenRecord};
use toolgate_domain::{Clock, StoreError};

use crate::CredentialStore;
use crate::changes::{Change, ChangeFeed, next_change};

type Result<T> = std::result::Result<T, StoreError>;

/// Entries kept at most; past it the cache starts over (a flood of distinct valid tokens is
/// not a thing, but memory must stay bounded whatever happens).
const MAX_ENTRIES: usize = 10_000;

struct Entry {
    read_at_ms: i64,
    token: TokenRecord,
    principal: PrincipalRecord,
}

pub struct CachedCredentials {
    inner: Arc<dyn CredentialStore>,
    clock: Clock,
    ttl_ms: i64,
    /// By the secret's hash (the secret itself is not kept).
    entries: Mutex<HashMap<String, Entry>>,
    /// Counts the times the cache was emptied: an answer read before the last emptying is not
    /// kept (it may predate the revocation that emptied it).
    generation: AtomicU64,
}

impl CachedCredentials {
    pub fn new(inner: Arc<dyn CredentialStore>, clock: Clock, ttl_ms: i64) -> Self {
        Self { inner, clock, ttl_ms, entries: Mutex::default(), generation: AtomicU64::new(0) }
    }

    /// The cache, emptied whenever `feed` says another replica changed credentials.
    pub fn following(self, feed: Option<&Arc<ChangeFeed>>) -> Arc<Self> {
        let cache = Arc::new(self);
        if let Some(feed) = feed {
            let (mut changes, weak) = (feed.subscribe(), Arc::downgrade(&cache));
            tokio::spawn(async move {
                while let Some(change) = next_change(&mut changes).await {
                    let Some(cache) = weak.upgrade() else { return };
                    if matches!(change, Change::Credentials | Change::Resync) {
                        cache.forget_everything();
                    }
                }
            });
        }
        cache
    }

    fn forget_everything(&self) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        self.generation.fetch_add(1, Ordering::SeqCst);
        entries.clear();
    }
}

#[async_trait]
impl CredentialStore for CachedCredentials {
    async fn authenticate(&self, secret: &str, now: i64) -> Result<Authentication> {
        let key = hash_secret(secret);
        let now_ms = self.clock.now_ms();
        {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(e) = entries.get(&key)
                && now_ms - e.read_at_ms < self.ttl_ms
                && e.token.expires_at > now
            {
                return Ok(Authentication::Valid { token: e.token.clone(), principal: e.principal.clone() });
            }
        }
        let generation = self.generation.load(Ordering::SeqCst);
        let answer = self.inner.authenticate(secret, now).await?;
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match &answer {
            Authentication::Valid { token, principal } if generation == self.generation.load(Ordering::SeqCst) => {
                if entries.len() >= MAX_ENTRIES {
                    entries.clear();
                }
                let entry = Entry { read_at_ms: now_ms, token: token.clone(), principal: principal.clone() };
                entries.insert(key, entry);
            }
            _ => {
                entries.remove(&key);
            }
        }
        Ok(answer)
    }

    async fn principal_count(&self) -> Result<i64> {
        self.inner.principal_count().await
    }

    async fn put_principal(&self, name: &str, roles: &[String], now: i64) -> Result<()> {
        let done = self.inner.put_principal(name, roles, now).await;
        self.forget_everything();
        done
    }

    async fn principal(&self, name: &str) -> Result<Option<PrincipalRecord>> {
        self.inner.principal(name).await
    }

    async fn principals(&self) -> Result<Vec<PrincipalRecord>> {
        self.inner.principals().await
    }

    async fn remove_principal(&self, name: &str, now: i64) -> Result<bool> {
        let done = self.inner.remove_principal(name, now).await;
        self.forget_everything();
        done
    }

    async fn create_token(&self, new: NewToken<'_>) -> Result<(TokenRecord, String)> {
        self.inner.create_token(new).await
    }

    async fn token(&self, id: &str) -> Result<Option<TokenRecord>> {
        self.inner.token(id).await
    }

    async fn rotate_token(
        &self,
        predecessor: &TokenRecord,
        overlap_secs: i64,
        now: i64,
    ) -> Result<(TokenRecord, String)> {
        let done = self.inner.rotate_token(predecessor, overlap_secs, now).await;
        self.forget_everything();
        done
    }

    async fn confirm_rotation(
        &self,
        successor_id: &str,
        secret: &str,
        principal: &str,
        now: i64,
    ) -> Result<Option<String>> {
        let done = self.inner.confirm_rotation(successor_id, secret, principal, now).await;
        self.forget_everything();
        done
    }

    async fn tokens(&self, principal: Option<&str>) -> Result<Vec<TokenRecord>> {
        self.inner.tokens(principal).await
    }

    async fn revoke_token(&self, id: &str, now: i64) -> Result<bool> {
        let done = self.inner.revoke_token(id, now).await;
        self.forget_everything();
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SqliteStore;

    #[tokio::test]
    async fn a_revocation_elsewhere_is_honoured_within_the_ttl_and_one_here_at_once() {
        let store = SqliteStore::open_in_memory().unwrap();
        let clock = Clock::stopped_at(1_800_000_000_000);
        let cached = CachedCredentials::new(Arc::new(store.clone()), clock.clone(), 1000);
        let now = clock.now_secs();
        store.put_principal("alice", &["Viewer".into()], now).await.unwrap();
        let new = |name| NewToken { principal: "alice", tier: Some("readonly"), name, now, expires_at: now + 3600 };
        let (a, secret_a) = store.create_token(new("a")).await.unwrap();
        let valid = |x: &Authentication| matches!(x, Authentication::Valid { .. });
        assert!(valid(&cached.authenticate(&secret_a, now).await.unwrap()));
        // Revoked behind the cache's back (the console, another replica).
        store.revoke_token(&a.id, now).await.unwrap();
        clock.advance_ms(999);
        assert!(valid(&cached.authenticate(&secret_a, now).await.unwrap()), "within the TTL it may still be served");
        clock.advance_ms(1);
        assert_eq!(cached.authenticate(&secret_a, now).await.unwrap(), Authentication::Revoked, "never past the TTL");
        // Revoked through the cache: refused at once.
        let (b, secret_b) = store.create_token(new("b")).await.unwrap();
        assert!(valid(&cached.authenticate(&secret_b, now).await.unwrap()));
        cached.revoke_token(&b.id, now).await.unwrap();
        assert_eq!(cached.authenticate(&secret_b, now).await.unwrap(), Authentication::Revoked);
        // Expiry is checked on every use, cached or not.
        let (_, secret_c) = store.create_token(NewToken { expires_at: now + 1, ..new("c") }).await.unwrap();
        assert!(valid(&cached.authenticate(&secret_c, now).await.unwrap()));
        assert_eq!(cached.authenticate(&secret_c, now + 1).await.unwrap(), Authentication::Expired);
    }
}

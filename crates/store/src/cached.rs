//! An authentication cache in front of a credential store: the hot path no longer asks the
//! database on every request. It can never outlive a revocation or an expiry by more than
//! its time to live: an entry is used for at most `ttl_ms` after it was read, a token past
//! its `expires_at` is never served from it, and every change made through this process
//! (revocation, rotation, a principal's removal or new roles) empties it at once. Another
//! replica's changes empty it as soon as the database tells of them (see [`crate::changes`]);
//! the console commands' (and a change whose notice was lost) are seen within `ttl_ms`.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use toolgate_domain::secrets::secret_digest;
use toolgate_domain::tokens::{Authentication, NewToken, PrincipalRecord, Rotation, TokenRecord};
use toolgate_domain::{Clock, StoreError};

use crate::CredentialStore;
use crate::changes::{Change, ChangeFeed, next_change};

type Result<T> = std::result::Result<T, StoreError>;

/// Entries kept at most; past it the cache starts over (a flood of distinct valid tokens is
/// not a thing, but memory must stay bounded whatever happens).
const MAX_ENTRIES: usize = 10_000;

/// A valid token and its principal as the cache holds them, shared rather than copied, with
/// room for one value its user derives from them (the HTTP edge keeps the MCP caller there):
/// derived once per entry, it goes when the entry goes (expiry, revocation, emptying).
pub struct CachedCredential {
    pub token: TokenRecord,
    pub principal: PrincipalRecord,
    derived: OnceLock<Arc<dyn Any + Send + Sync>>,
}

impl CachedCredential {
    fn new(token: TokenRecord, principal: PrincipalRecord) -> Self {
        Self { token, principal, derived: OnceLock::new() }
    }

    /// What `derive` makes of this credential, made on first use and kept with it. One type
    /// per cache: a second type asked of the same entry is made afresh each time.
    pub fn derived<T: Any + Send + Sync>(&self, derive: impl FnOnce(&Self) -> T) -> Arc<T> {
        if let Some(kept) = self.derived.get().and_then(|kept| kept.clone().downcast::<T>().ok()) {
            return kept;
        }
        let made = Arc::new(derive(self));
        // Two requests deriving at once: the first kept wins; both answers are the same.
        let _ = self.derived.set(made.clone());
        made
    }
}

struct Entry {
    read_at_ms: i64,
    credential: Arc<CachedCredential>,
}

pub struct CachedCredentials {
    inner: Arc<dyn CredentialStore>,
    clock: Clock,
    ttl_ms: i64,
    /// By the secret's SHA-256 (the secret itself is not kept).
    entries: Mutex<HashMap<[u8; 32], Entry>>,
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

    /// The entry for `key` if it may still be served at `now_ms`: read less than the time to
    /// live ago, and its token not expired.
    fn fresh(&self, key: &[u8; 32], now_ms: i64) -> Option<Arc<CachedCredential>> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let entry = entries.get(key)?;
        let fresh = now_ms - entry.read_at_ms < self.ttl_ms && entry.credential.token.expires_at > now_ms / 1000;
        fresh.then(|| entry.credential.clone())
    }
}

#[async_trait]
impl CredentialStore for CachedCredentials {
    fn cached(&self, secret: &str) -> Option<Arc<CachedCredential>> {
        self.fresh(&secret_digest(secret), self.clock.now_ms())
    }

    fn forget_cached(&self) {
        self.forget_everything();
    }

    async fn authenticate(&self, secret: &str, now: i64) -> Result<Authentication> {
        let key = secret_digest(secret);
        let now_ms = self.clock.now_ms();
        if let Some(hit) = self.fresh(&key, now_ms).filter(|c| c.token.expires_at > now) {
            return Ok(Authentication::Valid { token: hit.token.clone(), principal: hit.principal.clone() });
        }
        let generation = self.generation.load(Ordering::SeqCst);
        let answer = self.inner.authenticate(secret, now).await?;
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match &answer {
            Authentication::Valid { token, principal } if generation == self.generation.load(Ordering::SeqCst) => {
                if entries.len() >= MAX_ENTRIES {
                    entries.clear();
                }
                let credential = Arc::new(CachedCredential::new(token.clone(), principal.clone()));
                entries.insert(key, Entry { read_at_ms: now_ms, credential });
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

    async fn remove_principal(
        &self,
        name: &str,
        now: i64,
    ) -> Result<std::result::Result<bool, toolgate_domain::engines::EngineRefusal>> {
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
        successor_expires_at: i64,
        now: i64,
    ) -> Result<(TokenRecord, String)> {
        let done = self.inner.rotate_token(predecessor, overlap_secs, successor_expires_at, now).await;
        self.forget_everything();
        done
    }

    async fn rotation(&self, successor_id: &str) -> Result<Option<Rotation>> {
        self.inner.rotation(successor_id).await
    }

    async fn rotations(&self, principal: &str) -> Result<Vec<Rotation>> {
        self.inner.rotations(principal).await
    }

    async fn resolve_lapsed_rotations(&self, now: i64) -> Result<Vec<Rotation>> {
        let done = self.inner.resolve_lapsed_rotations(now).await;
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

    async fn assign_group_role(
        &self,
        principal: &str,
        group_id: &str,
        role: &str,
        change: toolgate_domain::records::Change<'_>,
    ) -> Result<std::result::Result<bool, toolgate_domain::groups::GroupRefusal>> {
        let done = self.inner.assign_group_role(principal, group_id, role, change).await;
        self.forget_everything();
        done
    }

    async fn unassign_group_role(&self, principal: &str, group_id: &str, role: &str) -> Result<bool> {
        let done = self.inner.unassign_group_role(principal, group_id, role).await;
        self.forget_everything();
        done
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
        let new = |name| NewToken {
            principal: "alice",
            tier: Some("readonly"),
            name,
            now,
            expires_at: now + 3600,
            toolsets: None,
        };
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

    /// The hot path's synchronous look-up keeps the same promises: never past the TTL, never
    /// past an expiry, never after a revocation made through the cache; and what is derived
    /// from an entry is made once and goes with it.
    #[tokio::test]
    async fn the_shared_answer_keeps_the_same_promises_and_its_derived_value_goes_with_it() {
        let store = SqliteStore::open_in_memory().unwrap();
        let clock = Clock::stopped_at(1_800_000_000_000);
        let cached = CachedCredentials::new(Arc::new(store.clone()), clock.clone(), 10_000);
        let now = clock.now_secs();
        store.put_principal("alice", &["Viewer".into()], now).await.unwrap();
        let new = |name, expires_at| NewToken {
            principal: "alice",
            tier: Some("readonly"),
            name,
            now,
            expires_at,
            toolsets: None,
        };
        let (a, secret_a) = store.create_token(new("a", now + 3600)).await.unwrap();
        let (_, secret_b) = store.create_token(new("b", now + 12)).await.unwrap();
        assert!(cached.cached(&secret_a).is_none(), "nothing is cached before the first authentication");
        cached.authenticate(&secret_a, now).await.unwrap();
        let derivations = std::sync::atomic::AtomicUsize::new(0);
        let derive = |c: &CachedCredential| {
            derivations.fetch_add(1, Ordering::SeqCst);
            c.token.id.clone()
        };
        let first = cached.cached(&secret_a).unwrap().derived(derive);
        let second = cached.cached(&secret_a).unwrap().derived(derive);
        assert_eq!((first.as_str(), Arc::ptr_eq(&first, &second)), (a.id.as_str(), true));
        assert_eq!(derivations.load(Ordering::SeqCst), 1, "derived once per entry");
        clock.advance_ms(10_000);
        assert!(cached.cached(&secret_a).is_none(), "never past the TTL");
        cached.authenticate(&secret_a, clock.now_secs()).await.unwrap();
        assert!(cached.cached(&secret_a).is_some());
        cached.revoke_token(&a.id, clock.now_secs()).await.unwrap();
        assert!(cached.cached(&secret_a).is_none(), "a revocation through the cache empties it at once");
        cached.authenticate(&secret_b, clock.now_secs()).await.unwrap();
        assert!(cached.cached(&secret_b).is_some());
        clock.advance_ms(1999);
        assert!(cached.cached(&secret_b).is_some());
        clock.advance_ms(1);
        assert!(cached.cached(&secret_b).is_none(), "an expired token is never served, whatever the TTL");
    }
}

//! Handshake-era sessions: minted by `initialize`, bound to the principal that made them,
//! capped per principal and in all. A full cap refuses the new session; a live session is
//! never evicted to make room. Idle sessions expire. A session id is never a credential:
//! every request still authenticates.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use toolgate_domain::secrets::random_hex;

use toolgate_domain::toolsets::Toolsets;

use super::replay::Ring;

/// How many sessions may live, and for how long without a request.
#[derive(Clone, Copy, Debug)]
pub struct SessionLimits {
    pub max_total: usize,
    pub max_per_principal: usize,
    pub idle_ms: i64,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self { max_total: 10_000, max_per_principal: 100, idle_ms: 3600 * 1000 }
    }
}

/// Which cap refused a new session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionCap {
    Principal(usize),
    Server(usize),
}

#[derive(Clone, Debug)]
pub struct Session {
    pub principal: String,
    pub version: String,
    pub client_capabilities: Value,
    pub last_seen_ms: i64,
    /// The level `logging/setLevel` asked for; None: no log lines.
    pub log_level: Option<toolgate_domain::LogLevel>,
    /// Every frame its streams sent, for resumption (closed when the session ends).
    pub ring: Arc<Ring>,
    /// When it was last written down in a shared database (replicas; see `replicas.rs`).
    pub shared_seen_ms: i64,
    /// The toolsets `initialize` chose (None: it chose none; see `chosen.rs`).
    pub toolsets: Option<Toolsets>,
    /// The toolsets `enable_toolset` added.
    pub enabled: Toolsets,
}

#[derive(Default)]
pub struct Sessions {
    limits: SessionLimits,
    inner: Mutex<HashMap<String, Session>>,
    /// The bytes every session's replay ring holds together.
    rings: super::replay::Budget,
    /// Each session's subscribed resource URIs (`resources/subscribe`).
    subscriptions: Mutex<HashMap<String, std::collections::BTreeSet<String>>>,
}

impl Sessions {
    pub fn new(limits: SessionLimits) -> Self {
        Self { limits, inner: Mutex::default(), rings: Default::default(), subscriptions: Mutex::default() }
    }

    pub fn create(
        &self,
        principal: &str,
        version: &str,
        capabilities: Value,
        now_ms: i64,
    ) -> Result<String, SessionCap> {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, s| {
            let live = now_ms - s.last_seen_ms < self.limits.idle_ms;
            if !live {
                s.ring.close();
            }
            live
        });
        self.subscriptions.lock().unwrap_or_else(|e| e.into_inner()).retain(|id, _| map.contains_key(id));
        if map.values().filter(|s| s.principal == principal).count() >= self.limits.max_per_principal {
            return Err(SessionCap::Principal(self.limits.max_per_principal));
        }
        if map.len() >= self.limits.max_total {
            return Err(SessionCap::Server(self.limits.max_total));
        }
        let id = format!("tgs-{}", random_hex::<16>());
        map.insert(id.clone(), self.fresh(principal, version, capabilities, now_ms));
        Ok(id)
    }

    /// Takes in a session another replica opened (its record from the shared database), under
    /// its id; None when this server is at its cap of sessions.
    pub fn adopt(&self, id: &str, principal: &str, version: &str, capabilities: Value, now_ms: i64) -> Option<Session> {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= self.limits.max_total {
            return None;
        }
        let session = self.fresh(principal, version, capabilities, now_ms);
        Some(map.entry(id.to_string()).or_insert(session).clone())
    }

    /// A session as it starts here: no log level, an empty replay ring.
    fn fresh(&self, principal: &str, version: &str, capabilities: Value, now_ms: i64) -> Session {
        Session {
            principal: principal.into(),
            version: version.into(),
            client_capabilities: capabilities,
            last_seen_ms: now_ms,
            log_level: None,
            ring: Arc::new(Ring::within(self.rings.clone(), super::replay::ALL_RINGS_BYTES)),
            shared_seen_ms: now_ms,
            toolsets: None,
            enabled: Toolsets::NONE,
        }
    }

    pub fn mark_shared_seen(&self, id: &str, now_ms: i64) {
        if let Some(session) = self.inner.lock().unwrap_or_else(|e| e.into_inner()).get_mut(id) {
            session.shared_seen_ms = now_ms;
        }
    }

    pub fn idle_ms(&self) -> i64 {
        self.limits.idle_ms
    }

    /// The live session `id` of `principal`; another principal's id reads as unknown.
    pub fn touch(&self, id: &str, principal: &str, now_ms: i64) -> Option<Session> {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let session = map.get_mut(id)?;
        if session.principal != principal || now_ms - session.last_seen_ms >= self.limits.idle_ms {
            return None;
        }
        session.last_seen_ms = now_ms;
        Some(session.clone())
    }

    /// Sets the session's log level; false when it is not the principal's live session.
    pub fn set_log_level(&self, id: &str, principal: &str, level: toolgate_domain::LogLevel) -> bool {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match map.get_mut(id) {
            Some(session) if session.principal == principal => {
                session.log_level = Some(level);
                true
            }
            _ => false,
        }
    }

    /// Records the toolsets the session's `initialize` chose.
    pub fn choose(&self, id: &str, toolsets: Option<Toolsets>) {
        if let Some(session) = self.inner.lock().unwrap_or_else(|e| e.into_inner()).get_mut(id) {
            session.toolsets = toolsets;
        }
    }

    /// Adds `more` to the principal's session's enabled toolsets: (those enabled before, and
    /// now, its ring); None when it is not the principal's live session.
    pub fn enable(&self, id: &str, principal: &str, more: Toolsets) -> Option<(Toolsets, Toolsets, Arc<Ring>)> {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let session = map.get_mut(id).filter(|s| s.principal == principal)?;
        let before = session.enabled;
        session.enabled = before.union(more);
        Some((before, session.enabled, session.ring.clone()))
    }

    /// The server is stopping: every session's GET channel ends (`session_terminated`);
    /// streamed calls end with their results (their handlers are cancelled).
    pub fn close_channels(&self) {
        let map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        for session in map.values() {
            session.ring.close_channel();
        }
    }

    /// Live sessions now.
    pub fn count(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Adds (or with `on` false, removes) `uri` among the session's subscriptions; false when
    /// it is not the principal's live session.
    pub fn subscribe(&self, id: &str, principal: &str, uri: &str, on: bool) -> bool {
        let owned =
            self.inner.lock().unwrap_or_else(|e| e.into_inner()).get(id).is_some_and(|s| s.principal == principal);
        if !owned {
            return false;
        }
        let mut subscriptions = self.subscriptions.lock().unwrap_or_else(|e| e.into_inner());
        let uris = subscriptions.entry(id.to_string()).or_default();
        match on {
            true => uris.insert(uri.to_string()),
            false => uris.remove(uri),
        };
        true
    }

    /// The replay rings (GET channels) of the live sessions subscribed to `uri`.
    pub fn subscribers(&self, uri: &str) -> Vec<Arc<Ring>> {
        // Always `inner` before `subscriptions`, as `create` takes them.
        let map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let subscriptions = self.subscriptions.lock().unwrap_or_else(|e| e.into_inner());
        subscriptions
            .iter()
            .filter(|(_, uris)| uris.contains(uri))
            .filter_map(|(id, _)| map.get(id).map(|s| s.ring.clone()))
            .collect()
    }

    /// Ends the session whoever it belongs to (another replica ended it); false when unknown.
    pub fn end(&self, id: &str) -> bool {
        let Some(principal) = self.inner.lock().unwrap_or_else(|e| e.into_inner()).get(id).map(|s| s.principal.clone())
        else {
            return false;
        };
        self.remove(id, &principal)
    }

    pub fn remove(&self, id: &str, principal: &str) -> bool {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if map.get(id).is_some_and(|s| s.principal == principal) {
            if let Some(session) = map.remove(id) {
                session.ring.close();
            }
            self.subscriptions.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_sessions_expire_and_free_their_place() {
        let sessions = Sessions::new(SessionLimits { max_total: 2, max_per_principal: 1, idle_ms: 1000 });
        let a = sessions.create("alice", "2025-11-25", Value::Null, 0).unwrap();
        assert_eq!(sessions.create("alice", "2025-11-25", Value::Null, 10), Err(SessionCap::Principal(1)));
        assert!(sessions.touch(&a, "alice", 900).is_some(), "a request keeps it alive");
        assert!(sessions.touch(&a, "bob", 900).is_none(), "another principal's id reads as unknown");
        assert!(sessions.touch(&a, "alice", 1900).is_none(), "idle for the whole window: expired");
        assert!(sessions.create("alice", "2025-11-25", Value::Null, 1901).is_ok(), "its place is free again");
        assert!(sessions.create("bob", "2025-11-25", Value::Null, 1902).is_ok());
        assert_eq!(sessions.create("carol", "2025-11-25", Value::Null, 1903), Err(SessionCap::Server(2)));
    }
}

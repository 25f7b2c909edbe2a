//! Handshake-era sessions: minted by `initialize`, bound to the principal that made them.
//! A session id is never a credential: every request still authenticates.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;

use toolgate_domain::secrets::random_hex;

/// Sessions idle longer than this are forgotten.
pub const IDLE_MS: i64 = 24 * 3600 * 1000;
const MAX_SESSIONS: usize = 10_000;

#[derive(Clone, Debug)]
pub struct Session {
    pub principal: String,
    pub version: String,
    pub client_capabilities: Value,
    pub last_seen_ms: i64,
}

#[derive(Default)]
pub struct Sessions {
    inner: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    pub fn create(&self, principal: &str, version: &str, capabilities: Value, now_ms: i64) -> String {
        let id = format!("tgs-{}", random_hex::<16>());
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, s| now_ms - s.last_seen_ms < IDLE_MS);
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map.iter().min_by_key(|(_, s)| s.last_seen_ms).map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        map.insert(
            id.clone(),
            Session {
                principal: principal.into(),
                version: version.into(),
                client_capabilities: capabilities,
                last_seen_ms: now_ms,
            },
        );
        id
    }

    /// The live session `id` of `principal`; another principal's id reads as unknown.
    pub fn touch(&self, id: &str, principal: &str, now_ms: i64) -> Option<Session> {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let session = map.get_mut(id)?;
        if session.principal != principal || now_ms - session.last_seen_ms >= IDLE_MS {
            return None;
        }
        session.last_seen_ms = now_ms;
        Some(session.clone())
    }

    pub fn remove(&self, id: &str, principal: &str) -> bool {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if map.get(id).is_some_and(|s| s.principal == principal) {
            map.remove(id);
            true
        } else {
            false
        }
    }
}

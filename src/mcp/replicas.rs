//! Replicas on one database: what the MCP layer shares with the others. A handshake-era
//! session opened on one replica is good on every one (its record is in the database; a
//! replica that has not seen it takes it in at its first request); a 2026-07-28 request state
//! is good once across all of them. What stays with the replica that holds it: a session's
//! streams (a GET resumed elsewhere is told to initialize again), its log level and resource
//! subscriptions, and the calls waiting on a client's answer (an answer that reaches another
//! replica is passed on to the one holding the call through the database's notifications).

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_domain::CancellationToken;
use toolgate_store::{Change, ChangeFeed, MAX_ANNOUNCED_BYTES, ReplicaStore, SessionRecord, next_change_until};

use super::McpServer;
use super::sessions::Session;

/// The replicas' shared state, and this replica's name.
pub(super) struct SharedState {
    pub(super) store: Arc<dyn ReplicaStore>,
    pub(super) replica: Arc<str>,
}

impl McpServer {
    /// Shares sessions and request-state marks with the other replicas through `store`.
    pub fn with_shared_state(mut self, store: Arc<dyn ReplicaStore>, replica: Arc<str>) -> Self {
        self.shared = Some(SharedState { store, replica });
        self
    }

    /// The live session `sid` of `principal`: this replica's, or one another opened.
    pub(super) async fn find_session(&self, sid: &str, principal: &str) -> Option<Session> {
        let now = self.now_ms();
        if let Some(session) = self.sessions.touch(sid, principal, now) {
            self.keep_shared_session_alive(sid, &session, now);
            return Some(session);
        }
        let shared = self.shared.as_ref()?;
        let record = match shared.store.session(sid).await {
            Ok(found) => found?,
            Err(e) => {
                tracing::warn!("could not look the session up in the shared database: {e}");
                return None;
            }
        };
        if record.principal != principal || now - record.last_seen_ms >= self.sessions.idle_ms() {
            return None;
        }
        let capabilities = serde_json::from_str(&record.client_capabilities).unwrap_or(Value::Null);
        tracing::info!(session = %sid, from = %record.replica, "a session opened on another replica");
        self.sessions.adopt(sid, principal, &record.version, capabilities, now)
    }

    /// Other replicas count a session idle from the last time one of them wrote it down:
    /// written again once a tenth of the idle window has passed (not on every request).
    fn keep_shared_session_alive(&self, sid: &str, session: &Session, now: i64) {
        let Some(shared) = &self.shared else { return };
        if now - session.shared_seen_ms < self.sessions.idle_ms() / 10 {
            return;
        }
        self.sessions.mark_shared_seen(sid, now);
        let (store, sid) = (shared.store.clone(), sid.to_string());
        tokio::spawn(async move {
            if let Err(e) = store.touch_session(&sid, now).await {
                tracing::warn!(session = %sid, "could not keep the session alive in the shared database: {e}");
            }
        });
    }

    /// Writes a new session down for the other replicas.
    pub(super) async fn share_session(&self, sid: &str, principal: &str, version: &str, capabilities: &Value) {
        let Some(shared) = &self.shared else { return };
        let now = self.now_ms();
        let record = SessionRecord {
            id: sid.to_string(),
            principal: principal.to_string(),
            version: version.to_string(),
            client_capabilities: capabilities.to_string(),
            last_seen_ms: now,
            replica: shared.replica.to_string(),
        };
        if let Err(e) = shared.store.put_session(&record, now - self.sessions.idle_ms()).await {
            tracing::warn!(session = %sid, "the session works on this replica only: the shared database refused it: {e}");
        }
    }

    /// The session ended: on every replica (those that took it in drop it when told).
    pub(super) async fn forget_shared_session(&self, sid: &str) {
        let Some(shared) = &self.shared else { return };
        let ended = async {
            shared.store.remove_session(sid).await?;
            shared.store.announce(Change::SessionEnded(sid.to_string())).await
        };
        if let Err(e) = ended.await {
            tracing::warn!(session = %sid, "could not end the session in the shared database: {e}");
        }
    }

    /// Marks a verified request state's nonce used across replicas: the refusal when another
    /// replica (or an earlier retry) used it already, or when that cannot be known.
    pub(super) async fn used_elsewhere(&self, nonce: Option<&(String, i64)>, now_secs: i64) -> Option<String> {
        let (shared, (nonce, expires)) = (self.shared.as_ref()?, nonce?);
        match shared.store.use_once(&format!("request-state:{nonce}"), *expires, now_secs).await {
            Ok(true) => None,
            Ok(false) => Some(super::input_required::StateError::Reused.to_string()),
            Err(e) => Some(format!("this requestState cannot be checked now ({e}): retry shortly")),
        }
    }
}

impl McpServer {
    /// A client's answer to a question a call asked: to the call if it runs here, else passed
    /// on to the other replicas (the one holding the call takes it). False when nobody can.
    pub(super) async fn take_answer(&self, sid: &str, id: &Value, outcome: Result<Value, Value>) -> bool {
        let passed_on = self.shared.as_ref().map(|_| outcome.clone());
        if self.outstanding.deliver(sid, id, outcome) {
            return true;
        }
        let (Some(shared), Some(outcome)) = (&self.shared, passed_on) else { return false };
        let outcome = match outcome {
            Ok(result) => json!({"result": result}),
            Err(error) => json!({"error": error}),
        };
        let text = json!({"session": sid, "id": id, "outcome": outcome}).to_string();
        if text.len() > MAX_ANNOUNCED_BYTES {
            tracing::warn!(
                session = %sid,
                "a client's answer of {} bytes is too large to pass on to another replica: route each session to one replica",
                text.len()
            );
            return false;
        }
        match shared.store.announce(Change::ClientAnswer(text)).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(session = %sid, "could not pass a client's answer on to the other replicas: {e}");
                false
            }
        }
    }

    /// Until `stop`: takes the client answers other replicas pass on.
    pub async fn follow_replicas(self: Arc<Self>, feed: Arc<ChangeFeed>, stop: CancellationToken) {
        let mut changes = feed.subscribe();
        while let Some(change) = next_change_until(&mut changes, &stop).await {
            match change {
                Change::ClientAnswer(text) => self.answer_passed_on(&text),
                Change::SessionEnded(sid) if self.sessions.end(&sid) => drop(self.in_flight.cancel_session(&sid)),
                _ => {}
            }
        }
    }

    fn answer_passed_on(&self, text: &str) {
        let Ok(passed) = serde_json::from_str::<Value>(text) else { return };
        let (Some(sid), Some(id)) = (passed["session"].as_str(), passed.get("id")) else { return };
        let outcome = match (passed["outcome"].get("result"), passed["outcome"].get("error")) {
            (Some(result), _) => Ok(result.clone()),
            (None, Some(error)) => Err(error.clone()),
            (None, None) => return,
        };
        // Every replica hears it; only the one holding the call has it outstanding.
        if self.outstanding.deliver(sid, id, outcome) {
            tracing::debug!(session = %sid, "took a client's answer passed on by another replica");
        }
    }
}

//! The server's half of an upload (docs/uploads.md), apart from its transport: an upload
//! connection's first frame takes a grant, binary frames are hashed, counted and stored as they
//! arrive (cut off the moment they pass the grant's size), and the end is checked against the
//! digest the agent claims and the one the grant expects. Every outcome is audited.

use std::sync::Arc;

use sha2::{Digest, Sha256};
use toolgate_domain::Clock;
use toolgate_domain::audit::{AuditEvent, AuditOutcome, AuditSink, TargetType};
use toolgate_domain::fleet::wire::{AgentMessage, ServerMessage, UPLOAD_FRAME_BYTES, UploadEnd};
use toolgate_domain::groups::Reach;
use toolgate_domain::uploads::{
    ENTRY_NAME_CHARS, MAX_LISTED_ENTRIES, NewGrant, PREVIEW_BYTES, STORED_CHUNK_BYTES, UploadKind, UploadRefusal,
};
use toolgate_store::{Claim, Finished, UploadStore};

/// What ends an upload early.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The agent's to hear: the grant is not usable, or the upload broke its terms.
    #[error("{0}")]
    Refused(String),
    #[error("the store failed: {0}")]
    Store(#[from] toolgate_domain::StoreError),
}

/// Takes uploads for the hub.
#[derive(Clone)]
pub struct UploadDesk {
    store: Arc<dyn UploadStore>,
    clock: Clock,
    audit: Arc<dyn AuditSink>,
    /// Uploads taken at once: each holds up to a stored chunk in memory.
    in_flight: Arc<tokio::sync::Semaphore>,
}

/// How many uploads one server takes at once (each buffers up to 1 MiB).
pub const MAX_CONCURRENT_UPLOADS: usize = 32;

/// One upload under way, holding its grant.
pub struct Receiving {
    desk: UploadDesk,
    agent_id: String,
    grant: NewGrant,
    attempt: String,
    received: u64,
    hasher: Sha256,
    pending: Vec<u8>,
    next_seq: i64,
    preview: Vec<u8>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl crate::Hub {
    /// Agents may upload under grants, taken by `desk`.
    pub fn with_uploads(mut self, desk: UploadDesk) -> Self {
        self.uploads = Some(desk);
        self
    }

    /// The desk uploads go to, if the server takes any.
    pub fn uploads(&self) -> Option<&UploadDesk> {
        self.uploads.as_ref()
    }
}

/// The plugin action whose result rows report an upload (crates/agent/plugins/files.yaml).
pub(crate) const COLLECT_ACTION: (&str, &str) = ("files", "collect");

impl UploadDesk {
    /// Rows of a `files.collect` step as the server knows them: each row's path, kind, size and
    /// digest become what the server itself read, counted and hashed under that grant from
    /// that agent (docs/uploads.md), never the agent's claim. Err: the server holds no such
    /// upload, so the agent's figures cannot be vouched for.
    pub(crate) async fn vouch(
        &self,
        agent_id: &str,
        rows: &mut [serde_json::Map<String, serde_json::Value>],
    ) -> Result<Result<(), String>, toolgate_domain::StoreError> {
        use serde_json::json;
        for row in rows {
            let grant_id = row.get("grant_id").and_then(|v| v.as_str()).unwrap_or_default().to_string();
            let stored = self.store.grant(&grant_id, &Reach::Fleet).await?;
            let Some(grant) = stored.filter(|g| g.minted.agent_id == agent_id && g.sha256.is_some()) else {
                return Ok(Err(format!(
                    "the server holds no upload under grant `{grant_id}` from this agent, so the figures the agent reported were not kept"
                )));
            };
            row.insert("size_bytes".into(), json!(grant.size_bytes));
            row.insert("sha256".into(), json!(grant.sha256));
            if let Some(kind) = grant.kind {
                row.insert("kind".into(), json!(kind.as_str()));
            }
            if let Some(path) = grant.uploaded_path {
                row.insert("path".into(), json!(path));
            }
        }
        Ok(Ok(()))
    }

    pub fn new(store: Arc<dyn UploadStore>, clock: Clock, audit: Arc<dyn AuditSink>) -> Self {
        Self { store, clock, audit, in_flight: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_UPLOADS)) }
    }

    /// A place for one more upload, if there is room.
    pub fn permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.in_flight.clone().try_acquire_owned().ok()
    }

    fn audit(&self, agent_id: &str, grant_id: &str, action: &str, outcome: AuditOutcome, detail: String) {
        let event = AuditEvent::new(self.clock.now_ms(), action, outcome)
            .target(TargetType::UploadGrant, grant_id)
            .about_agents([agent_id.to_string()])
            .detail(detail);
        self.audit.record(event);
    }

    /// `why` an upload of `grant_id` is refused, audited; the error to answer.
    fn refused(&self, agent_id: &str, grant_id: &str, why: impl std::fmt::Display) -> UploadError {
        let why = why.to_string();
        self.audit(agent_id, grant_id, "upload.refused", AuditOutcome::Denied, why.clone());
        UploadError::Refused(why)
    }

    /// Answers an upload connection's first frame: the grant is taken, or why not.
    pub async fn start(&self, agent_id: &str, frame: &str) -> Result<(Receiving, ServerMessage), UploadError> {
        let (grant_id, asked) = match serde_json::from_str::<AgentMessage>(frame) {
            Ok(AgentMessage::UploadStart { grant_id, path }) => (grant_id, path),
            _ => return Err(UploadError::Refused("an upload connection starts with an upload_start frame".into())),
        };
        let refused = |refusal: UploadRefusal| Err(self.refused(agent_id, &grant_id, refusal));
        let grant = self.store.grant(&grant_id, &Reach::Fleet).await?;
        let Some(grant) = grant.filter(|g| g.minted.agent_id == agent_id) else {
            return refused(UploadRefusal::Unknown(grant_id.clone()));
        };
        let path = match (&grant.minted.source_path, asked) {
            (Some(granted), Some(asked)) if *granted != asked => {
                return refused(UploadRefusal::OtherPath {
                    grant_id: grant_id.clone(),
                    granted: granted.clone(),
                    asked,
                });
            }
            (Some(granted), _) => granted.clone(),
            (None, Some(asked)) => asked,
            (None, None) => return refused(UploadRefusal::NoPath(grant_id.clone())),
        };
        let attempt = toolgate_domain::secrets::random_hex::<16>();
        let claim =
            Claim { grant_id: &grant_id, agent_id, path: &path, attempt: &attempt, now_ms: self.clock.now_ms() };
        if let Err(refusal) = self.store.claim_grant(&claim).await? {
            return refused(refusal);
        }
        let ready = ServerMessage::UploadReady { path, max_bytes: grant.minted.max_bytes.max(0) as u64 };
        let receiving = Receiving {
            desk: self.clone(),
            agent_id: agent_id.to_string(),
            grant: grant.minted,
            attempt,
            received: 0,
            hasher: Sha256::new(),
            pending: Vec::with_capacity(STORED_CHUNK_BYTES.min(UPLOAD_FRAME_BYTES * 4)),
            next_seq: 0,
            preview: Vec::new(),
        };
        Ok((receiving, ready))
    }
}

impl Receiving {
    pub fn grant_id(&self) -> &str {
        &self.grant.grant_id
    }

    /// Takes one binary frame: refused (and the grant spent) past the grant's size.
    pub async fn take(&mut self, bytes: &[u8]) -> Result<(), UploadError> {
        if bytes.len() > UPLOAD_FRAME_BYTES {
            return Err(self.spend(format!("a frame of {} bytes, more than {UPLOAD_FRAME_BYTES}", bytes.len())).await);
        }
        self.received += bytes.len() as u64;
        if self.received > self.grant.max_bytes.max(0) as u64 {
            let why = format!("the upload passed the {} bytes the grant allows: cut off", self.grant.max_bytes);
            return Err(self.spend(why).await);
        }
        self.hasher.update(bytes);
        if self.preview.len() < PREVIEW_BYTES {
            let room = PREVIEW_BYTES - self.preview.len();
            self.preview.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
        self.pending.extend_from_slice(bytes);
        if self.pending.len() >= STORED_CHUNK_BYTES {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), UploadError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let now = self.desk.clock.now_ms();
        let stored =
            self.desk.store.put_chunk(&self.grant.grant_id, &self.attempt, self.next_seq, &self.pending, now).await?;
        if !stored {
            let now = self.desk.store.grant(&self.grant.grant_id, &Reach::Fleet).await?;
            let refusal = UploadRefusal::lost(now.as_ref(), &self.grant.grant_id);
            return Err(self.desk.refused(&self.agent_id, &self.grant.grant_id, refusal));
        }
        self.next_seq += 1;
        self.pending.clear();
        Ok(())
    }

    /// Spends the grant with `why` (audited); the error to answer.
    async fn spend(&mut self, why: String) -> UploadError {
        let now = self.desk.clock.now_ms();
        if let Err(e) = self.desk.store.abandon_upload(&self.grant.grant_id, &self.attempt, Some(&why), now).await {
            return e.into();
        }
        self.desk.refused(&self.agent_id, &self.grant.grant_id, why)
    }

    /// The agent's next text frame: its end (checked, stored) or its abort.
    pub async fn finish(mut self, frame: &str) -> Result<ServerMessage, UploadError> {
        let end = match serde_json::from_str::<AgentMessage>(frame) {
            Ok(AgentMessage::UploadEnd(end)) => end,
            Ok(AgentMessage::UploadAbort { reason }) => {
                return Err(self.spend(format!("the agent could not send it: {reason}")).await);
            }
            _ => return Err(self.spend("expected upload_end or upload_abort".into()).await),
        };
        let sha256 = hex(&std::mem::take(&mut self.hasher).finalize());
        if let Some(why) = self.broken_terms(&end, &sha256) {
            return Err(self.spend(why).await);
        }
        self.flush().await?;
        let kind = UploadKind::parse(&end.kind).unwrap_or(UploadKind::File);
        let preview = match kind {
            UploadKind::File => String::from_utf8_lossy(&self.preview).into_owned(),
            UploadKind::Tar => listed(&end.entries, end.entry_count),
        };
        let done = Finished {
            grant_id: &self.grant.grant_id,
            attempt: &self.attempt,
            kind,
            sha256: &sha256,
            size_bytes: self.received as i64,
            chunks: self.next_seq,
            preview: &preview,
            now_ms: self.desk.clock.now_ms(),
        };
        if let Err(refusal) = self.desk.store.finish_upload(&done).await? {
            return Err(self.desk.refused(&self.agent_id, &self.grant.grant_id, refusal));
        }
        let detail = format!("{} bytes ({}) from {}, sha256 {sha256}", self.received, kind.as_str(), self.agent_id);
        self.desk.audit(&self.agent_id, &self.grant.grant_id, "upload.stored", AuditOutcome::Success, detail);
        Ok(ServerMessage::UploadStored { sha256, size_bytes: self.received })
    }

    /// Why the end does not match what came, or what the grant expects.
    fn broken_terms(&self, end: &UploadEnd, sha256: &str) -> Option<String> {
        if UploadKind::parse(&end.kind).is_none() {
            return Some(format!("unknown upload kind `{}` (file or tar)", end.kind));
        }
        if end.size_bytes != self.received || end.sha256 != sha256 {
            return Some(format!(
                "the agent sent {} bytes with SHA-256 {}, the server received {} bytes with SHA-256 {sha256}",
                end.size_bytes, end.sha256, self.received
            ));
        }
        match &self.grant.expected_sha256 {
            Some(expected) if expected != sha256 => {
                Some(format!("the content's SHA-256 is {sha256}, the grant expects {expected}"))
            }
            _ => None,
        }
    }

    /// The connection ended before the end frame: the grant is open again for another try.
    pub async fn dropped(self) {
        let now = self.desk.clock.now_ms();
        if let Err(e) = self.desk.store.abandon_upload(&self.grant.grant_id, &self.attempt, None, now).await {
            tracing::warn!(grant_id = %self.grant.grant_id, "an interrupted upload could not give its grant back: {e}");
        }
    }
}

/// A bundle's preview: its member names, one per line, cut to size.
fn listed(entries: &[String], count: u64) -> String {
    let names: Vec<String> = entries
        .iter()
        .take(MAX_LISTED_ENTRIES)
        .map(|name| name.chars().filter(|c| !c.is_control()).take(ENTRY_NAME_CHARS).collect())
        .collect();
    let more = count.saturating_sub(names.len() as u64);
    let mut text = names.join("\n");
    if more > 0 {
        text.push_str(&format!("\n(and {more} more)"));
    }
    text
}

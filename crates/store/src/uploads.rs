//! Upload grants and the content they brought: the store's trait (docs/uploads.md). Content
//! is kept in the database (so every replica serves what any one received), content-addressed
//! by SHA-256, in chunks of [`STORED_CHUNK_BYTES`] written as they arrive. Every read a person
//! or a client makes is confined to the agents its reach covers, in the query itself.
//!
//! [`STORED_CHUNK_BYTES`]: toolgate_domain::uploads::STORED_CHUNK_BYTES

use async_trait::async_trait;
use toolgate_domain::StoreError;
use toolgate_domain::groups::Reach;
use toolgate_domain::uploads::{NewGrant, UploadGrant, UploadKind, UploadRefusal};

pub(crate) type Result<T> = std::result::Result<T, StoreError>;

/// An upload taking a grant.
#[derive(Clone, Debug)]
pub struct Claim<'a> {
    pub grant_id: &'a str,
    pub agent_id: &'a str,
    /// The path it will read (already settled against the grant's).
    pub path: &'a str,
    /// A fresh id for this attempt: its chunks are stored under it.
    pub attempt: &'a str,
    pub now_ms: i64,
}

/// An upload that arrived whole, its digest checked.
#[derive(Clone, Debug)]
pub struct Finished<'a> {
    pub grant_id: &'a str,
    pub attempt: &'a str,
    pub kind: UploadKind,
    pub sha256: &'a str,
    pub size_bytes: i64,
    pub chunks: i64,
    pub preview: &'a str,
    pub now_ms: i64,
}

/// Stored content: where its chunks are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredContent {
    pub sha256: String,
    pub size_bytes: i64,
    pub attempt: String,
    pub chunks: i64,
}

/// What a retention sweep removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Content no stored grant keeps any longer: (sha256, size).
    pub deleted: Vec<(String, i64)>,
    /// Chunks of attempts that never finished (a replica died, a connection dropped).
    pub orphan_chunks: u64,
}

#[async_trait]
pub trait UploadStore: Send + Sync {
    async fn mint_grant(&self, grant: &NewGrant) -> Result<()>;
    /// The grant, if its agent is within `reach`.
    async fn grant(&self, grant_id: &str, reach: &Reach) -> Result<Option<UploadGrant>>;
    /// Grants of agents within `reach` (of one agent, when given), newest first.
    async fn grants(&self, reach: &Reach, agent_id: Option<&str>, limit: usize) -> Result<Vec<UploadGrant>>;
    /// Revokes a grant that is not revoked already: what it is now, and whether this call
    /// revoked it; None when there is no such grant within `reach`. Stored content it alone
    /// kept goes at the next sweep; an upload holding it is refused at its next chunk.
    async fn revoke_grant(
        &self,
        grant_id: &str,
        reach: &Reach,
        by: &str,
        now_ms: i64,
    ) -> Result<Option<(UploadGrant, bool)>>;
    /// Takes the grant for an upload: it must be this agent's, open and unexpired (or held
    /// by an upload silent past the lease).
    async fn claim_grant(&self, claim: &Claim<'_>) -> Result<std::result::Result<(), UploadRefusal>>;
    /// Stores chunk `seq` of the attempt and renews its claim; false when the attempt no
    /// longer holds the grant (revoked, or taken over after its lease ran out).
    async fn put_chunk(&self, grant_id: &str, attempt: &str, seq: i64, bytes: &[u8], now_ms: i64) -> Result<bool>;
    /// Records the upload as stored (the content once per digest: an upload of bytes already
    /// kept keeps the first copy and drops its own chunks); Err when the attempt no longer
    /// holds the grant.
    async fn finish_upload(&self, done: &Finished<'_>) -> Result<std::result::Result<UploadGrant, UploadRefusal>>;
    /// Ends an attempt that did not finish: with `reason`, the grant is spent (`failed`);
    /// without, it is open again for another try. Its chunks go either way.
    async fn abandon_upload(&self, grant_id: &str, attempt: &str, reason: Option<&str>, now_ms: i64) -> Result<()>;
    /// The content a stored grant brought, if still kept.
    async fn content(&self, sha256: &str) -> Result<Option<StoredContent>>;
    /// One chunk of stored content.
    async fn content_chunk(&self, content: &StoredContent, seq: i64) -> Result<Option<Vec<u8>>>;
    /// Deletes content whose every stored grant's retention has ended by `now_ms` (revoked
    /// grants keep nothing), and chunks no kept content or live attempt owns.
    async fn sweep_uploads(&self, now_ms: i64) -> Result<Swept>;
}

/// The columns [`UploadGrant`] is read from, in order (`g` is the grant, `f` its content).
pub(crate) const GRANT_COLUMNS: &str = "g.grant_id, g.agent_id, g.source_path, g.expected_sha256, g.retention_class, \
     g.retention_secs, g.max_bytes, g.created_at_ms, g.expires_at_ms, g.created_by, g.state, g.attempt, \
     g.claimed_at_ms, g.finished_at_ms, g.uploaded_path, g.kind, g.sha256, g.size_bytes, g.failure, g.revoked_at_ms, \
     g.revoked_by, g.preview, f.sha256 IS NOT NULL";

/// The grant joined to its content, for [`GRANT_COLUMNS`].
pub(crate) const GRANT_FROM: &str =
    "upload_grant g LEFT JOIN upload_content f ON f.sha256 = g.sha256 AND g.state = 'stored'";

/// Why a claim was refused, from the grant as it is (read after the claim's update matched
/// nothing).
pub(crate) fn claim_refusal(grant: Option<UploadGrant>, claim: &Claim<'_>) -> UploadRefusal {
    use toolgate_domain::uploads::GrantState;
    let id = claim.grant_id.to_string();
    let Some(g) = grant.filter(|g| g.minted.agent_id == claim.agent_id) else { return UploadRefusal::Unknown(id) };
    match g.state {
        GrantState::Stored => UploadRefusal::Used { grant_id: id, at_ms: g.finished_at_ms.unwrap_or_default() },
        GrantState::Revoked => UploadRefusal::Revoked { grant_id: id, by: g.revoked_by.unwrap_or_default() },
        GrantState::Failed => UploadRefusal::Failed { grant_id: id, reason: g.failure.unwrap_or_default() },
        GrantState::Open | GrantState::Uploading if claim.now_ms >= g.minted.expires_at_ms => {
            UploadRefusal::Expired { grant_id: id, at_ms: g.minted.expires_at_ms }
        }
        // Open and unexpired, yet not taken: another upload took it first.
        GrantState::Uploading | GrantState::Open => UploadRefusal::InUse(id),
    }
}

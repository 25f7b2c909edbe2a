//! Upload grants (docs/uploads.md): one agent may hand one file (or a directory, bundled as a
//! tar) back to the server, once, within a size, before a deadline. What it sends is kept
//! content-addressed (by SHA-256) for as long as its retention class says, then deleted.
//!
//! A grant moves `open` → `uploading` (an upload connection holds it, renewing its claim with
//! every chunk) → `stored` or `failed`; `revoked` from any state. An open grant past its
//! deadline reads as `expired`. A claim whose holder went silent (a replica died mid-upload)
//! may be taken again after [`CLAIM_LEASE_MS`].

use serde::Serialize;

/// How long an upload may go without a chunk before its claim lapses.
pub const CLAIM_LEASE_MS: i64 = 120_000;
/// Bytes per stored chunk: an upload is written, and a download read, one chunk at a time.
pub const STORED_CHUNK_BYTES: usize = 1024 * 1024;
/// How much of an uploaded file's start is kept as its preview (agent data, never trusted).
pub const PREVIEW_BYTES: usize = 512;
/// How many names of a bundle's members are kept, each cut to [`ENTRY_NAME_CHARS`].
pub const MAX_LISTED_ENTRIES: usize = 50;
pub const ENTRY_NAME_CHARS: usize = 256;

/// What an upload holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UploadKind {
    /// One regular file, as it is.
    File,
    /// A directory's regular files, bundled by the agent as a tar (ustar/GNU).
    Tar,
}

impl UploadKind {
    pub fn as_str(self) -> &'static str {
        match self {
            UploadKind::File => "file",
            UploadKind::Tar => "tar",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "file" => Some(UploadKind::File),
            "tar" => Some(UploadKind::Tar),
            _ => None,
        }
    }
}

/// Where a grant is in its life, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantState {
    Open,
    Uploading,
    Stored,
    Failed,
    Revoked,
}

impl GrantState {
    pub fn as_str(self) -> &'static str {
        match self {
            GrantState::Open => "open",
            GrantState::Uploading => "uploading",
            GrantState::Stored => "stored",
            GrantState::Failed => "failed",
            GrantState::Revoked => "revoked",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [GrantState::Open, GrantState::Uploading, GrantState::Stored, GrantState::Failed, GrantState::Revoked]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

/// A grant as minted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewGrant {
    /// 32 lowercase hex digits, random.
    pub grant_id: String,
    pub agent_id: String,
    /// The file or directory to send; None: the collecting instruction names it.
    pub source_path: Option<String>,
    pub expected_sha256: Option<String>,
    pub retention_class: String,
    /// How long a stored upload is kept, from when it was stored.
    pub retention_secs: i64,
    pub max_bytes: i64,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub created_by: String,
}

/// A grant with everything that happened to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadGrant {
    pub minted: NewGrant,
    pub state: GrantState,
    /// The upload attempt holding (or that held) the grant: its chunks are stored under it.
    pub attempt: Option<String>,
    pub claimed_at_ms: Option<i64>,
    pub finished_at_ms: Option<i64>,
    /// The path the agent read (the grant's, or the instruction's when the grant named none).
    pub uploaded_path: Option<String>,
    pub kind: Option<UploadKind>,
    pub sha256: Option<String>,
    pub size_bytes: Option<i64>,
    pub failure: Option<String>,
    pub revoked_at_ms: Option<i64>,
    pub revoked_by: Option<String>,
    /// The start of a file (lossy UTF-8) or a bundle's member names: agent data.
    pub preview: Option<String>,
    /// Whether the stored content is still kept (false once its retention ended).
    pub content_kept: bool,
}

impl UploadGrant {
    /// The state a reader is shown: an open grant past its deadline is `expired`.
    pub fn state_at(&self, now_ms: i64) -> &'static str {
        match self.state {
            GrantState::Open if now_ms >= self.minted.expires_at_ms => "expired",
            state => state.as_str(),
        }
    }

    /// When its stored content's retention ends (None until stored).
    pub fn retained_until_ms(&self) -> Option<i64> {
        match self.state {
            GrantState::Stored => self.finished_at_ms.map(|at| at + self.minted.retention_secs * 1000),
            _ => None,
        }
    }
}

/// Why an upload cannot take (or keep) a grant; each says what to do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UploadRefusal {
    #[error("this agent holds no upload grant {0} (mint one with mint_upload_grant for this agent)")]
    Unknown(String),
    #[error(
        "upload grant {grant_id} was used already (stored at {at_ms} ms): a grant is good for one upload; mint another"
    )]
    Used { grant_id: String, at_ms: i64 },
    #[error("upload grant {grant_id} expired at {at_ms} ms: mint another")]
    Expired { grant_id: String, at_ms: i64 },
    #[error("upload grant {grant_id} was revoked by {by}: mint another if the upload is still wanted")]
    Revoked { grant_id: String, by: String },
    #[error("upload grant {grant_id} was spent by a failed upload ({reason}): mint another")]
    Failed { grant_id: String, reason: String },
    #[error("upload grant {0} is being used by another upload right now")]
    InUse(String),
    #[error("upload grant {grant_id} is for {granted}, not {asked}")]
    OtherPath { grant_id: String, granted: String, asked: String },
    #[error("upload grant {0} names no source path: give collect_files a `path`")]
    NoPath(String),
}

impl UploadRefusal {
    /// Why an upload's attempt lost the grant it held: revoked, or taken over by another
    /// after its claim lapsed.
    pub fn lost(grant: Option<&UploadGrant>, grant_id: &str) -> Self {
        match grant {
            Some(g) if g.state == GrantState::Revoked => {
                UploadRefusal::Revoked { grant_id: grant_id.to_string(), by: g.revoked_by.clone().unwrap_or_default() }
            }
            _ => UploadRefusal::InUse(grant_id.to_string()),
        }
    }
}

//! Human approvals: a ticket is minted by the first call of an approval-gated tool, decided by
//! a person, and consumed exactly once by the recall. The rules live here; the store makes
//! them atomic.

use serde::Serialize;
use serde_json::Value;

/// A ticket lives this long: from submission while pending, from review once approved.
pub const APPROVAL_TTL_SECS: i64 = 7 * 24 * 3600;
pub const MAX_PENDING_PER_SUBMITTER: i64 = 25;
pub const MAX_PENDING_TOTAL: i64 = 1000;
/// The surface that mints tickets for tool calls (and alone may redeem them).
pub const MCP_SURFACE: &str = "mcp";
/// The REST twins of tools (`/api/v1/tokens`): their tickets share the tool's definition
/// and are redeemable only there, never by a tool call (nor a tool call's by them).
pub const REST_SURFACE: &str = "rest";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalStatus {
    Pending,
    Approved,
    Rejected,
    Consumed,
}

impl ApprovalStatus {
    pub const ALL: [ApprovalStatus; 4] = [Self::Pending, Self::Approved, Self::Rejected, Self::Consumed];

    pub fn from_label(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.label() == s)
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Rejected => "rejected",
            Self::Consumed => "consumed",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Approval {
    pub id: String,
    pub definition: String,
    pub tool: String,
    pub surface: String,
    pub submitter: String,
    pub canonical_args: String,
    pub status: ApprovalStatus,
    pub submitted_at: i64,
    pub expires_at: i64,
    pub reviewer: Option<String>,
    pub reviewed_at: Option<i64>,
    pub review_comment: Option<String>,
    pub consumed_at: Option<i64>,
}

impl Approval {
    pub fn expired(&self, now: i64) -> bool {
        self.expires_at <= now
    }
}

/// The plan a held change started when its ticket was minted, and what a person approved of
/// it: each agent's plan digest (`fleet::wire::plan_digest`). An agent without one changes
/// nothing on the recall.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlanBinding {
    pub execution_id: String,
    /// None until the ticket is approved.
    pub approved: Option<std::collections::BTreeMap<String, String>>,
}

/// The definition a tool call's ticket is minted for.
pub fn definition_of(tool: &str) -> String {
    format!("{MCP_SURFACE}.{tool}")
}

/// Compact JSON with sorted keys (serde_json's map is ordered), without `approval_id`.
pub fn canonical_arguments(arguments: &Value) -> String {
    // Every call's audit row is written with this: copy the arguments only to drop the id.
    if arguments.get(toolgate_policy::APPROVAL_ID).is_none() {
        return serde_json::to_string(arguments).expect("JSON values serialize");
    }
    let mut a = arguments.clone();
    if let Some(obj) = a.as_object_mut() {
        obj.remove(toolgate_policy::APPROVAL_ID);
    }
    serde_json::to_string(&a).expect("JSON values serialize")
}

/// What a ticket is bound to, and what the recall must repeat exactly: the canonical
/// arguments with sensitive values redacted (what reviewers see), and a digest of the
/// sensitive values ("" when the tool has none), so the secret itself is never stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgumentBinding {
    pub canonical: String,
    pub sensitive_digest: String,
}

impl ArgumentBinding {
    pub fn of(arguments: &Value, sensitive: &[&str]) -> Self {
        Self {
            canonical: canonical_arguments(&crate::redact::redacted(arguments, sensitive)),
            sensitive_digest: crate::redact::sensitive_digest(arguments, sensitive),
        }
    }

    /// For a tool without sensitive arguments.
    pub fn plain(canonical: &str) -> Self {
        Self { canonical: canonical.to_string(), sensitive_digest: String::new() }
    }
}

/// What minting did.
#[derive(Debug, PartialEq, Eq)]
pub enum Mint {
    /// A new pending ticket, or the same one again for the same submitter, tool and arguments.
    Pending(Box<Approval>),
    TooManyForSubmitter,
    TooManyInAll,
}

/// What a recall found.
#[derive(Debug, PartialEq, Eq)]
pub enum Recall {
    /// Consumed by this call: run the tool.
    Run(Box<Approval>),
    StillPending(Box<Approval>),
    Unknown,
    /// Another tool or other arguments than the ticket was minted for.
    Mismatch,
    /// Consumed already, or not the caller's, or not minted by MCP: told apart only in audit.
    NotRedeemable {
        why: &'static str,
    },
    Rejected,
    Expired,
}

/// Why a person's decision was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReviewRefusal {
    #[error("no approval `{0}`")]
    Unknown(String),
    #[error("the reviewer must not be the submitter (`{0}`)")]
    OwnRequest(String),
    #[error("the approval is {0}, not pending")]
    NotPending(&'static str),
    #[error("the approval expired")]
    Expired,
}

/// A person's decision on a ticket.
#[derive(Clone, Debug)]
pub struct Review<'a> {
    pub id: &'a str,
    pub reviewer: &'a str,
    pub approve: bool,
    pub comment: Option<&'a str>,
    pub now: i64,
}

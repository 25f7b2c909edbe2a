//! Principals and their API tokens: the records and the rules.

use serde::Serialize;

/// What every token secret starts with, so scanners and people recognise one.
pub const TOKEN_PREFIX: &str = "tg_";
/// The longest a token may live, wherever it is minted.
pub const MAX_TOKEN_DAYS: i64 = 90;
pub const MAX_TOKEN_SECS: i64 = MAX_TOKEN_DAYS * 86_400;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PrincipalRecord {
    pub name: String,
    /// Fleet-wide roles.
    pub roles: Vec<String>,
    /// Roles held on management groups: their permissions over those groups' agents only.
    pub group_roles: Vec<crate::groups::GroupRole>,
    pub created_at: i64,
    pub kind: crate::engines::PrincipalKind,
}

impl PrincipalRecord {
    /// The principal as the gate judges it: its fleet-wide roles and its roles on groups.
    pub fn principal(&self) -> crate::Principal {
        crate::Principal {
            name: self.name.clone(),
            roles: self.roles.clone(),
            group_roles: self.group_roles.clone(),
            kind: self.kind,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TokenRecord {
    pub id: String,
    pub name: String,
    pub principal: String,
    /// The MCP tier; `None` for an administrator credential that cannot call tools.
    pub tier: Option<String>,
    pub created_at: i64,
    pub expires_at: i64,
    pub revoked_at: Option<i64>,
    /// The toolsets its client is shown when a request chooses none (tools.yaml names,
    /// separated by commas; None: its tier's default). docs/toolsets.md.
    pub toolsets: Option<String>,
}

/// A token's state at a moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenState {
    Active,
    Revoked,
    Expired,
}

impl TokenState {
    pub fn label(self) -> &'static str {
        match self {
            TokenState::Active => "active",
            TokenState::Revoked => "revoked",
            TokenState::Expired => "expired",
        }
    }
}

impl TokenRecord {
    pub fn state(&self, now: i64) -> TokenState {
        if self.revoked_at.is_some() {
            TokenState::Revoked
        } else if self.expires_at <= now {
            TokenState::Expired
        } else {
            TokenState::Active
        }
    }
}

/// The result of presenting a secret. Callers answer every failure alike (401).
#[derive(Clone, Debug, PartialEq, Eq)]
// One per authentication, matched at once and never stored: boxing the valid answer would
// add an allocation to every request for no saving.
#[allow(clippy::large_enum_variant)]
pub enum Authentication {
    Valid { token: TokenRecord, principal: PrincipalRecord },
    Unknown,
    Revoked,
    Expired,
}

/// A new token: who, which tier, what it is called, and its life (Unix seconds).
#[derive(Clone, Debug)]
pub struct NewToken<'a> {
    pub principal: &'a str,
    pub tier: Option<&'a str>,
    pub name: &'a str,
    pub now: i64,
    pub expires_at: i64,
    /// [`TokenRecord::toolsets`].
    pub toolsets: Option<&'a str>,
}

/// How a credential rotation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RotationResolution {
    /// The successor's secret was shown and the predecessor revoked.
    Confirmed,
    /// The overlap ended first: the predecessor expired by itself.
    Expired,
}

impl RotationResolution {
    pub fn label(self) -> &'static str {
        match self {
            RotationResolution::Confirmed => "confirmed",
            RotationResolution::Expired => "expired",
        }
    }

    pub fn from_label(label: &str) -> Option<Self> {
        [RotationResolution::Confirmed, RotationResolution::Expired].into_iter().find(|r| r.label() == label)
    }
}

/// A credential rotation: a successor minted beside its predecessor, which keeps working until
/// the rotation is confirmed or its overlap ends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Rotation {
    pub principal: String,
    pub predecessor_id: String,
    pub successor_id: String,
    pub started_at: i64,
    /// When the predecessor stops working by itself.
    pub overlap_ends_at: i64,
    pub predecessor_revoked_at: Option<i64>,
    pub resolution: Option<RotationResolution>,
    pub resolved_at: Option<i64>,
}

impl Rotation {
    /// Neither confirmed nor past its overlap: both credentials work.
    pub fn is_pending(&self, now: i64) -> bool {
        self.resolution.is_none() && self.predecessor_revoked_at.is_none() && self.overlap_ends_at > now
    }
}

//! Engine principals: the identities automation runs as. Each is owned by a person, holds
//! roles (fleet-wide or on management groups, never a role policy.yaml marks human-only) and
//! credentials of bounded lifetime; it never approves anything and never signs in to the
//! console. docs/identities.md.

use serde::Serialize;

/// What every engine principal's id starts with; no person's name may.
pub const ENGINE_PREFIX: &str = "engine:";
/// The longest engine principal id.
pub const MAX_ENGINE_ID: usize = 128;

/// Whether a principal is a person or automation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PrincipalKind {
    #[default]
    Person,
    Engine,
}

impl PrincipalKind {
    pub fn label(self) -> &'static str {
        match self {
            PrincipalKind::Person => "person",
            PrincipalKind::Engine => "engine",
        }
    }

    pub fn from_label(label: &str) -> PrincipalKind {
        match label {
            "engine" => PrincipalKind::Engine,
            _ => PrincipalKind::Person,
        }
    }
}

/// `engine:` followed by lowercase letters, digits, `.`, `_` or `-` (the reference's pattern).
pub fn check_engine_id(id: &str) -> Result<(), String> {
    let Some(slug) = id.strip_prefix(ENGINE_PREFIX) else {
        return Err(format!("`{id}` is not an engine principal id: those start with `{ENGINE_PREFIX}`"));
    };
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-');
    match (slug.is_empty(), slug.chars().all(allowed), id.len() <= MAX_ENGINE_ID) {
        (true, _, _) => Err(format!("`{id}` names no engine: give a name after `{ENGINE_PREFIX}`")),
        (_, false, _) => Err(format!("`{id}`: after `{ENGINE_PREFIX}` only a-z, 0-9, `.`, `_` and `-`")),
        (_, _, false) => Err(format!("`{id}` is longer than {MAX_ENGINE_ID} characters")),
        _ => Ok(()),
    }
}

/// How much an engine principal may ask of one server: requests per minute (a token bucket
/// that refills continuously) and requests in flight at once (a stream holds its slot for its
/// whole life).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct EngineQuota {
    pub requests_per_minute: u32,
    pub concurrent_requests: u32,
}

/// policy.yaml `engines`, as the server reads it.
#[derive(Debug)]
pub struct EngineRules {
    /// Roles an engine principal may never hold.
    pub human_only_roles: &'static [&'static str],
    /// Grants that make a role administrator-class.
    pub administrator_permissions: &'static [toolgate_policy::Pattern],
    /// Each engine principal's quota unless its record overrides it.
    pub quota: EngineQuota,
    /// The tier of a credential minted without one.
    pub credential_tier: Option<&'static str>,
}

impl EngineRules {
    pub fn is_human_only(&self, role: &str) -> bool {
        self.human_only_roles.contains(&role)
    }

    /// Why `principal` (of `kind`) may not hold `role`: an engine principal never holds one
    /// policy.yaml marks human-only.
    pub fn refusal_to_hold(&self, kind: PrincipalKind, principal: &str, role: &str) -> Option<String> {
        (kind == PrincipalKind::Engine && self.is_human_only(role)).then(|| {
            format!(
                "`{principal}` is an engine principal and `{role}` is human-only (policy.yaml engines.human_only_roles)"
            )
        })
    }
}

/// An engine principal as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EngineRecord {
    pub principal_id: String,
    pub display_name: String,
    /// The person answerable for it.
    pub owner: String,
    pub justification: String,
    /// `internal` or `external` (the reference's values).
    pub classification: String,
    pub created_at: i64,
    pub created_by: String,
    pub revoked_at: Option<i64>,
    pub revoke_reason: Option<String>,
    pub superseded_by: Option<String>,
    /// Its own quota, where it differs from policy.yaml's defaults.
    pub requests_per_minute: Option<u32>,
    pub concurrent_requests: Option<u32>,
}

impl EngineRecord {
    pub fn is_revoked(&self) -> bool {
        self.revoked_at.is_some()
    }

    /// Its quota: its own figures where it has them, else `defaults`.
    pub fn quota(&self, defaults: EngineQuota) -> EngineQuota {
        EngineQuota {
            requests_per_minute: self.requests_per_minute.unwrap_or(defaults.requests_per_minute),
            concurrent_requests: self.concurrent_requests.unwrap_or(defaults.concurrent_requests),
        }
    }
}

/// A new engine principal, as asked.
#[derive(Clone, Debug)]
pub struct NewEngine<'a> {
    pub principal_id: &'a str,
    pub display_name: &'a str,
    pub owner: &'a str,
    pub justification: &'a str,
    pub classification: &'a str,
    pub requests_per_minute: Option<u32>,
    pub concurrent_requests: Option<u32>,
    pub created_by: &'a str,
    pub now: i64,
}

/// Why an engine principal cannot be created or changed as asked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EngineRefusal {
    #[error("no engine principal `{0}`; list_engine_principals lists them")]
    Unknown(String),
    #[error("a principal named `{0}` exists already")]
    NameTaken(String),
    #[error("no person `{0}` to own it (`toolgate principal list` lists them)")]
    UnknownOwner(String),
    #[error("`{0}` is an engine principal: only a person may own one")]
    OwnerIsEngine(String),
    #[error("engine principal `{0}` is revoked: it can no longer be given credentials, roles or owners")]
    Revoked(String),
    #[error("`{owner}` owns the engine principals {engines}: transfer them first (transfer_engine_principal_owner)")]
    OwnsEngines { owner: String, engines: String },
    #[error("`{0}` is an engine principal: revoke it (revoke_engine_principal) instead of removing it")]
    IsEngine(String),
}

//! Access reviews: a campaign snapshots every grant when it opens (people's and engine
//! principals' fleet-wide roles, roles on management groups, live API tokens with their
//! tiers); reviewers attest each or flag it for revocation; closing applies every flag.
//! docs/identities.md.

use serde::{Deserialize, Serialize};

use crate::engines::PrincipalKind;
use crate::groups::GroupRole;
use crate::tokens::{PrincipalRecord, TokenRecord, TokenState};

/// What kind of grant a row is (the reference's `principal_type`, and `token`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GrantType {
    /// A person's fleet-wide role.
    User,
    /// An engine principal's fleet-wide role.
    Engine,
    /// A role held on a management group (by a person or an engine principal).
    Group,
    /// A live API token: its tier is the "role".
    Token,
    /// A role a person holds because the identity provider puts them in a group that maps to
    /// it (docs/sign-in.md): as last seen at their sign-in; changed at the IdP, never here.
    Idp,
}

impl GrantType {
    pub const ALL: [GrantType; 5] =
        [GrantType::User, GrantType::Engine, GrantType::Group, GrantType::Token, GrantType::Idp];

    pub fn label(self) -> &'static str {
        match self {
            GrantType::User => "user",
            GrantType::Engine => "engine",
            GrantType::Group => "group",
            GrantType::Token => "token",
            GrantType::Idp => "idp",
        }
    }

    pub fn from_label(label: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.label() == label)
    }
}

/// A reviewer's decision (the reference's values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Attested,
    FlaggedRevoke,
}

impl Decision {
    pub fn label(self) -> &'static str {
        match self {
            Decision::Attested => "attested",
            Decision::FlaggedRevoke => "flagged_revoke",
        }
    }

    pub fn from_label(label: &str) -> Option<Self> {
        [Decision::Attested, Decision::FlaggedRevoke].into_iter().find(|d| d.label() == label)
    }
}

/// Which grant of a campaign: its type, who (a principal, or a token's id), the role (a
/// token's tier), and the group for a role held on one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct GrantKey {
    pub principal_type: GrantType,
    pub principal_id: String,
    pub role_name: String,
    /// The management group, for `group` rows; empty otherwise.
    pub group_id: String,
}

/// One grant as the campaign snapshotted it, with its decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Grant {
    #[serde(flatten)]
    pub key: GrantKey,
    /// The principal the grant belongs to (a token's owner): never the one who attests it.
    pub holder: String,
    pub decision: Option<Decision>,
    pub justification: Option<String>,
    pub decided_by: Option<String>,
    pub decided_at: Option<i64>,
    /// When closing applied its `flagged_revoke`.
    pub applied_at: Option<i64>,
    /// Where an `idp` grant comes from: the identity provider and its groups.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// A role a person's identity-provider groups bring (`group_id` empty: fleet-wide), as their
/// last sign-in showed it, with the groups that bring it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdpGrant {
    pub role: String,
    #[serde(default)]
    pub group_id: String,
    pub idp_groups: Vec<String>,
}

/// A person's grants from their identity provider: who, which IdP, which grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdpGrants {
    pub principal: String,
    pub issuer: String,
    pub grants: Vec<IdpGrant>,
}

impl Grant {
    /// What to tell a reviewer who flags this grant, when closing cannot take it away here.
    pub fn changed_elsewhere(&self) -> Option<String> {
        (self.key.principal_type == GrantType::Idp).then(|| {
            format!(
                "{} holds {} through the identity provider ({}): remove them from that group there; closing this review cannot revoke it here",
                self.holder,
                self.key.role_name,
                self.source.as_deref().unwrap_or("its groups")
            )
        })
    }
}

/// A campaign's header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Campaign {
    pub campaign_id: String,
    pub title: String,
    pub opened_by: String,
    pub opened_at: i64,
    pub closed_by: Option<String>,
    pub closed_at: Option<i64>,
}

impl Campaign {
    pub fn is_open(&self) -> bool {
        self.closed_at.is_none()
    }
}

/// Every grant standing now: fleet-wide roles (as `user` or `engine`), roles on groups, live
/// tokens (their tier as the role, `(none)` for a tierless API credential), and the roles
/// people's identity-provider groups brought at their last sign-in (`idp`).
pub fn snapshot(principals: &[PrincipalRecord], tokens: &[TokenRecord], idp: &[IdpGrants], now: i64) -> Vec<Grant> {
    let grant = |principal_type, principal_id: &str, role_name: &str, group_id: &str, holder: &str| Grant {
        key: GrantKey {
            principal_type,
            principal_id: principal_id.into(),
            role_name: role_name.into(),
            group_id: group_id.into(),
        },
        holder: holder.into(),
        decision: None,
        justification: None,
        decided_by: None,
        decided_at: None,
        applied_at: None,
        source: None,
    };
    let mut grants = Vec::new();
    for p in principals {
        let kind = match p.kind {
            PrincipalKind::Person => GrantType::User,
            PrincipalKind::Engine => GrantType::Engine,
        };
        grants.extend(p.roles.iter().map(|role| grant(kind, &p.name, role, "", &p.name)));
        grants.extend(
            p.group_roles
                .iter()
                .map(|GroupRole { group_id, role }| grant(GrantType::Group, &p.name, role, group_id, &p.name)),
        );
    }
    for t in tokens.iter().filter(|t| t.state(now) == TokenState::Active) {
        grants.push(grant(GrantType::Token, &t.id, t.tier.as_deref().unwrap_or(NO_TIER), "", &t.principal));
    }
    for person in idp {
        for g in &person.grants {
            let source = format!("group(s) {} at {}", g.idp_groups.join(", "), person.issuer);
            let row = grant(GrantType::Idp, &person.principal, &g.role, &g.group_id, &person.principal);
            grants.push(Grant { source: Some(source), ..row });
        }
    }
    grants
}

/// The "role" of a tierless API credential in a campaign.
pub const NO_TIER: &str = "(none)";

/// Why a decision or a closing is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReviewRefusal {
    #[error("no access review `{0}`; list_access_reviews lists them")]
    Unknown(String),
    #[error("access review `{0}` is closed: its decisions are final")]
    Closed(String),
    #[error(
        "access review `{campaign}` has no {principal_type} grant of `{role}` to `{principal}`{on}; get_access_review lists its grants"
    )]
    UnknownGrant { campaign: String, principal_type: &'static str, principal: String, role: String, on: String },
    #[error("`{0}` may not attest or flag its own grants: another reviewer must")]
    OwnGrant(String),
    #[error(
        "{count} grant(s) of access review `{campaign}` have no decision, and policy.yaml access_reviews.close_with_undecided is false: decide them first"
    )]
    Undecided { campaign: String, count: usize },
}

//! People who sign in through the organisation's identity provider (docs/sign-in.md): each is a
//! principal of kind `person` linked to one (issuer, subject) pair, the only stable name an
//! identity provider gives a person. The link is made on first use (when the deployment lets
//! it) or beforehand by an operator (`toolgate principal link`).

use async_trait::async_trait;
use toolgate_domain::StoreError;
use toolgate_domain::reviews::{IdpGrant, IdpGrants};

pub(crate) type Result<T> = std::result::Result<T, StoreError>;

/// One person's link to their identity provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FederatedIdentity {
    pub issuer: String,
    pub subject: String,
    pub principal: String,
    /// As the identity provider last said (a token's or the ID token's `name`, `email`).
    pub display_name: Option<String>,
    pub email: Option<String>,
    pub created_at: i64,
    pub last_seen_at: Option<i64>,
    /// The roles their groups brought at their last sign-in (for access reviews).
    pub idp_grants: Vec<IdpGrant>,
}

/// A first sign-in: the principal is named after `name_hint` (made unique when taken).
#[derive(Clone, Copy, Debug)]
pub struct NewFederated<'a> {
    pub issuer: &'a str,
    pub subject: &'a str,
    pub name_hint: &'a str,
    pub display_name: Option<&'a str>,
    pub email: Option<&'a str>,
    pub idp_grants: &'a [IdpGrant],
    pub now: i64,
}

/// A sign-in of a linked person, as recorded.
#[derive(Clone, Copy, Debug)]
pub struct Seen<'a> {
    pub issuer: &'a str,
    pub subject: &'a str,
    pub display_name: Option<&'a str>,
    pub email: Option<&'a str>,
    pub idp_grants: &'a [IdpGrant],
    pub now: i64,
}

/// Why a principal cannot be linked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LinkRefusal {
    #[error("there is no principal `{0}`")]
    UnknownPrincipal(String),
    #[error("`{0}` is an engine principal: only people sign in through an identity provider")]
    Engine(String),
    #[error("`{principal}` is already linked to subject `{subject}` of {issuer}")]
    PrincipalLinked { principal: String, issuer: String, subject: String },
    #[error("subject `{subject}` of {issuer} is already linked to `{principal}`")]
    SubjectLinked { principal: String, issuer: String, subject: String },
}

#[async_trait]
pub trait FederatedStore: Send + Sync {
    async fn federated(&self, issuer: &str, subject: &str) -> Result<Option<FederatedIdentity>>;
    /// Makes a person principal with no roles and links it, in one transaction. A pair
    /// linked meanwhile (a concurrent first sign-in) answers the existing link.
    async fn provision_federated(&self, new: NewFederated<'_>) -> Result<FederatedIdentity>;
    /// Links an existing person principal beforehand.
    async fn link_federated(
        &self,
        principal: &str,
        issuer: &str,
        subject: &str,
        now: i64,
    ) -> Result<std::result::Result<FederatedIdentity, LinkRefusal>>;
    /// Records a sign-in: when, the name and email the identity provider gave, and the roles
    /// the groups it listed bring.
    async fn seen_federated(&self, seen: Seen<'_>) -> Result<()>;
    /// Every link (of `principal`, when given), by principal.
    async fn federated_identities(&self, principal: Option<&str>) -> Result<Vec<FederatedIdentity>>;
    /// The removal that blocks this pair, if its principal was removed: it is refused, and
    /// not provisioned again, until it is re-admitted.
    async fn tombstone(&self, issuer: &str, subject: &str) -> Result<Option<Tombstone>>;
    /// Re-admits a pair whose principal was removed; false when none was blocked.
    async fn readmit(&self, issuer: &str, subject: &str) -> Result<bool>;
}

/// An IdP subject whose principal was removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tombstone {
    pub issuer: String,
    pub subject: String,
    /// The principal it was, removed at `removed_at` (Unix seconds).
    pub principal: String,
    pub removed_at: i64,
}

/// The columns [`FederatedIdentity`] is read from, in order.
pub(crate) const FEDERATED_COLUMNS: &str =
    "issuer, subject, principal, display_name, email, created_at, last_seen_at, idp_grants";

/// The stored form of a person's IdP grants (a JSON array); an unreadable one reads as none.
pub(crate) fn grants_from(text: &str) -> Vec<IdpGrant> {
    serde_json::from_str(text).unwrap_or_default()
}

pub(crate) fn grants_text(grants: &[IdpGrant]) -> String {
    serde_json::to_string(grants).unwrap_or_else(|_| "[]".into())
}

/// Why `principal` (as found) may not be linked, given the link it has (`its_link`) and the
/// one the pair has (`pair_link`); None when it may.
pub(crate) fn link_refusal(
    name: &str,
    principal: Option<toolgate_domain::tokens::PrincipalRecord>,
    its_link: Option<FederatedIdentity>,
    pair_link: Option<FederatedIdentity>,
) -> Option<LinkRefusal> {
    use toolgate_domain::engines::PrincipalKind;
    match (principal, its_link, pair_link) {
        (None, _, _) => Some(LinkRefusal::UnknownPrincipal(name.to_string())),
        (Some(p), _, _) if p.kind == PrincipalKind::Engine => Some(LinkRefusal::Engine(name.to_string())),
        (Some(_), Some(l), _) => {
            Some(LinkRefusal::PrincipalLinked { principal: l.principal, issuer: l.issuer, subject: l.subject })
        }
        (Some(_), None, Some(l)) => {
            Some(LinkRefusal::SubjectLinked { principal: l.principal, issuer: l.issuer, subject: l.subject })
        }
        (Some(_), None, None) => None,
    }
}

/// Every person's IdP grants, for a review's snapshot.
pub(crate) fn idp_grants_of(identities: Vec<FederatedIdentity>) -> Vec<IdpGrants> {
    identities
        .into_iter()
        .filter(|i| !i.idp_grants.is_empty())
        .map(|i| IdpGrants { principal: i.principal, issuer: i.issuer, grants: i.idp_grants })
        .collect()
}

/// The principal names a first sign-in tries, in order: the hint made a valid name
/// (letters, digits and `. _ - @`, at most 64 bytes), then with a counter.
pub(crate) fn candidate_names(hint: &str) -> impl Iterator<Item = String> {
    let mut base: String = hint.chars().filter(|c| c.is_ascii_alphanumeric() || "._-@".contains(*c)).take(64).collect();
    if base.is_empty() {
        base = "person".into();
    }
    std::iter::once(base.clone()).chain((2..).map(move |n| format!("{base}-{n}")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_made_valid_and_unique() {
        let names: Vec<String> = super::candidate_names("Ana María <ana@example.com>").take(3).collect();
        assert_eq!(names, ["AnaMaraana@example.com", "AnaMaraana@example.com-2", "AnaMaraana@example.com-3"]);
        assert_eq!(super::candidate_names("   ").next().unwrap(), "person");
    }
}

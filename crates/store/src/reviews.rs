//! Access reviews: the store's trait (docs/identities.md). A backend snapshots the grants and
//! inserts the campaign in one transaction, and applies a campaign's flags and closes it in
//! another, so a closing is all or nothing.

use async_trait::async_trait;
use toolgate_domain::StoreError;
use toolgate_domain::reviews::{Campaign, Decision, Grant, GrantKey, ReviewRefusal};

type Result<T> = std::result::Result<T, StoreError>;
pub(crate) type Refusable<T> = Result<std::result::Result<T, ReviewRefusal>>;

/// A reviewer's decision on one grant.
#[derive(Clone, Debug)]
pub struct RecordDecision<'a> {
    pub campaign_id: &'a str,
    pub key: GrantKey,
    pub decision: Decision,
    pub justification: Option<&'a str>,
    pub by: &'a str,
    pub now: i64,
}

/// What closing did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Closed {
    pub campaign: Campaign,
    /// The flagged grants, revoked now.
    pub applied: Vec<Grant>,
    /// The grants nobody decided, left as they are.
    pub undecided: Vec<Grant>,
    /// Flagged grants that only the identity provider can take away (`idp`): left as they are,
    /// for a person to change there.
    pub at_idp: Vec<Grant>,
}

#[async_trait]
pub trait ReviewStore: Send + Sync {
    /// Opens a campaign over every grant standing now; its header and how many grants.
    async fn open_review(&self, title: &str, by: &str, now: i64) -> Result<(Campaign, usize)>;
    /// Every campaign, newest first, with its grants.
    async fn reviews(&self) -> Result<Vec<(Campaign, Vec<Grant>)>>;
    async fn review(&self, campaign_id: &str) -> Result<Option<(Campaign, Vec<Grant>)>>;
    /// Records (or overwrites) a decision on an open campaign's grant: never the holder's own.
    /// The decision before, and the grant now.
    async fn record_decision(&self, decision: RecordDecision<'_>) -> Refusable<(Option<Decision>, Grant)>;
    /// Applies every `flagged_revoke` (a fleet-wide role taken away, a role on a group, a token
    /// revoked) and closes the campaign, atomically; refused with undecided grants unless
    /// `allow_undecided`.
    async fn close_review(&self, campaign_id: &str, by: &str, now: i64, allow_undecided: bool) -> Refusable<Closed>;
}

/// The grant columns, in [`Grant`]'s order.
pub(crate) const GRANT_COLUMNS: &str = "principal_type, principal_id, role_name, group_id, holder, decision, \
     justification, decided_by, decided_at, applied_at, source";
pub(crate) const CAMPAIGN_COLUMNS: &str = "id, title, opened_by, opened_at, closed_by, closed_at";

/// The refusal unless `found` (the campaign `id` names) is open: decisions and a closing
/// need one.
pub(crate) fn refuse_unless_open(found: Option<&Campaign>, id: &str) -> Option<ReviewRefusal> {
    match found {
        None => Some(ReviewRefusal::Unknown(id.to_string())),
        Some(campaign) if !campaign.is_open() => Some(ReviewRefusal::Closed(id.to_string())),
        Some(_) => None,
    }
}

/// The refusal for a grant a campaign does not have.
pub(crate) fn unknown_grant(campaign: &str, key: &GrantKey) -> ReviewRefusal {
    ReviewRefusal::UnknownGrant {
        campaign: campaign.to_string(),
        principal_type: key.principal_type.label(),
        principal: key.principal_id.clone(),
        role: key.role_name.clone(),
        on: match key.group_id.as_str() {
            "" => String::new(),
            group => format!(" on group `{group}`"),
        },
    }
}

/// A new campaign's id.
pub(crate) fn new_campaign_id() -> String {
    format!("ar-{}", toolgate_domain::secrets::random_hex::<4>())
}

//! Which approval tickets a principal sees and may decide. A grant of policy.yaml
//! `server.reviewer_permission` fleet-wide (or on the root) covers every ticket; a grant on
//! management groups covers the tickets whose targets lie within them, judged by membership
//! when read:
//! - every agent the call names is one of those groups' agents,
//! - every group it names (or places a group under) is one of them or lies below one,
//! - a call that chooses agents by a scope comes from a submitter whose own grant of the
//!   tool's pair lies within them (the scope is judged again when the call runs, within the
//!   submitter's reach, so it can never reach past the reviewer's groups).
//!
//! A ticket that names nothing (a credential, a fleet-wide role, an account) is a fleet-wide
//! reviewer's. Without any grant a principal reads its own tickets and decides none.

use toolgate_domain::approvals::Approval;
use toolgate_domain::catalogue::Catalogue;
use toolgate_domain::groups::{ManagementGroup, Reach, Visible, at_or_below};
use toolgate_domain::targets::Targets;
use toolgate_domain::{Principal, StoreError};
use toolgate_store::{ApprovalStore, CredentialStore, GroupStore};

/// How many tickets a confined reviewer's listing judges per store page.
const JUDGED_PER_PAGE: i64 = 200;

/// A principal reading or deciding tickets, with what its grant covers read once.
pub struct Reviewing<'a> {
    name: &'a str,
    catalogue: &'static Catalogue,
    credentials: &'a dyn CredentialStore,
    reach: Option<Reach>,
    /// The agents the grant covers, as of now.
    visible: Visible,
    /// For a grant on groups: the tree, as of now.
    tree: Vec<ManagementGroup>,
}

impl<'a> Reviewing<'a> {
    pub async fn of(
        catalogue: &'static Catalogue,
        credentials: &'a dyn CredentialStore,
        groups: &dyn GroupStore,
        principal: &'a Principal,
    ) -> Result<Self, StoreError> {
        let reach = catalogue.review_reach(principal);
        let (visible, tree) = match &reach {
            Some(Reach::Fleet) => (Visible::All, vec![]),
            Some(reach) => (groups.visible(reach).await?, groups.management_groups().await?),
            None => (Visible::nothing(), vec![]),
        };
        Ok(Reviewing { name: &principal.name, catalogue, credentials, reach, visible, tree })
    }

    /// The agents its grant covers: what it may be shown of the agents a ticket names.
    pub fn visible(&self) -> &Visible {
        &self.visible
    }

    pub fn name(&self) -> &str {
        self.name
    }

    /// Who reads executions and responses as this reviewer (its review reach), for the store's
    /// confinement; None when it is no reviewer at all.
    pub fn reader(&self) -> Option<toolgate_domain::groups::Reader> {
        let reach = self.reach.clone()?;
        Some(toolgate_domain::groups::Reader { principal: self.name.to_string(), reach })
    }

    /// Whether it may decide any ticket at all (fleet-wide, or within some groups).
    pub fn is_reviewer(&self) -> bool {
        self.reach.is_some()
    }

    /// Whether it reviews the whole fleet's tickets.
    pub fn is_fleet(&self) -> bool {
        self.reach.as_ref().is_some_and(Reach::is_fleet)
    }

    /// The ticket's targets lie within what its grant covers (not whether it may decide it:
    /// nobody decides their own).
    pub async fn covers(&self, ticket: &Approval) -> Result<bool, StoreError> {
        let reviewer_groups = match &self.reach {
            None => return Ok(false),
            Some(Reach::Fleet) => return Ok(true),
            Some(Reach::Groups(groups)) => groups,
        };
        let (tree, visible) = (&self.tree, &self.visible);
        let among: Vec<&str> = reviewer_groups.iter().map(String::as_str).collect();
        let targets = Targets::of_canonical(&ticket.canonical_args);
        let within = !targets.is_empty()
            && targets.agents.iter().all(|agent| visible.contains(agent))
            && targets.groups.iter().all(|group| at_or_below(tree, group, &among));
        if !within || targets.scope.is_none() {
            return Ok(within);
        }
        Ok(match self.submitter_reach(ticket).await? {
            Some(Reach::Groups(theirs)) => theirs.iter().all(|group| at_or_below(tree, group, &among)),
            Some(Reach::Fleet) | None => false,
        })
    }

    /// The agents a held call's scope would be judged among when it runs: its submitter's
    /// grant of the tool's pair, as the store says now (`None`: no grant, or no such tool).
    pub async fn submitter_reach(&self, ticket: &Approval) -> Result<Option<Reach>, StoreError> {
        let Some(tool) = self.catalogue.tools.iter().find(|t| t.name == ticket.tool) else { return Ok(None) };
        let Some(submitter) = self.credentials.principal(&ticket.submitter).await? else { return Ok(None) };
        Ok(self.catalogue.reach(&submitter.principal(), tool.securable, tool.operation))
    }

    /// Whether it sees the ticket: its own, or one its grant covers.
    pub async fn sees(&self, ticket: &Approval) -> Result<bool, StoreError> {
        Ok(ticket.submitter == self.name || self.covers(ticket).await?)
    }

    /// The tickets it sees, newest first, filtered by status and submitter when given, at
    /// most `limit`. A confined reviewer's are judged page by page, so the limit counts what
    /// it sees, never what it does not.
    pub async fn tickets(
        &self,
        store: &dyn ApprovalStore,
        status: Option<&str>,
        submitter: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Approval>, StoreError> {
        if self.is_fleet() {
            return store.approvals(status, submitter, 0, limit).await;
        }
        if !self.is_reviewer() {
            return match submitter {
                Some(other) if other != self.name => Ok(vec![]),
                _ => store.approvals(status, Some(self.name), 0, limit).await,
            };
        }
        let mut seen = Vec::new();
        let mut offset = 0;
        loop {
            let page = store.approvals(status, submitter, offset, JUDGED_PER_PAGE).await?;
            let exhausted = (page.len() as i64) < JUDGED_PER_PAGE;
            offset += page.len() as i64;
            for ticket in page {
                if seen.len() as i64 >= limit {
                    return Ok(seen);
                }
                if self.sees(&ticket).await? {
                    seen.push(ticket);
                }
            }
            if exhausted || seen.len() as i64 >= limit {
                return Ok(seen);
            }
        }
    }
}

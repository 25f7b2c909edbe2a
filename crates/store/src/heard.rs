//! An approval store that says when a ticket changes (decided, consumed) in this process, so
//! that whoever follows the ticket's resource hears it without polling. Another replica hears
//! of it from PostgreSQL's notification ([`crate::Change::ApprovalChanged`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use toolgate_domain::StoreError;
use toolgate_domain::approvals::{Approval, ArgumentBinding, Mint, PlanBinding, Recall, Review, ReviewRefusal};

use crate::ApprovalStore;

type Result<T> = std::result::Result<T, StoreError>;

/// What is told a ticket's id when it changed.
pub type Heard = Arc<dyn Fn(&str) + Send + Sync>;

pub struct HeardApprovals {
    inner: Arc<dyn ApprovalStore>,
    heard: Heard,
}

impl HeardApprovals {
    pub fn new(inner: Arc<dyn ApprovalStore>, heard: Heard) -> Self {
        Self { inner, heard }
    }
}

#[async_trait]
impl ApprovalStore for HeardApprovals {
    async fn approval(&self, id: &str) -> Result<Option<Approval>> {
        self.inner.approval(id).await
    }

    async fn approvals(
        &self,
        status: Option<&str>,
        submitter: Option<&str>,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<Approval>> {
        self.inner.approvals(status, submitter, offset, limit).await
    }

    async fn mint(
        &self,
        surface: &str,
        tool: &str,
        submitter: &str,
        arguments: &ArgumentBinding,
        now: i64,
    ) -> Result<Mint> {
        self.inner.mint(surface, tool, submitter, arguments, now).await
    }

    async fn review(&self, review: Review<'_>) -> Result<std::result::Result<Approval, ReviewRefusal>> {
        let decided = self.inner.review(review).await?;
        if let Ok(ticket) = &decided {
            (self.heard)(&ticket.id);
        }
        Ok(decided)
    }

    async fn link_plan(&self, approval_id: &str, execution_id: &str) -> Result<()> {
        self.inner.link_plan(approval_id, execution_id).await
    }

    async fn plan_of(&self, approval_id: &str) -> Result<Option<PlanBinding>> {
        self.inner.plan_of(approval_id).await
    }

    async fn bind_plans(&self, approval_id: &str, approved: &BTreeMap<String, String>) -> Result<bool> {
        self.inner.bind_plans(approval_id, approved).await
    }

    async fn recall(
        &self,
        surface: &str,
        id: &str,
        tool: &str,
        caller: &str,
        arguments: &ArgumentBinding,
        now: i64,
    ) -> Result<Recall> {
        let recall = self.inner.recall(surface, id, tool, caller, arguments, now).await?;
        if matches!(recall, Recall::Run(_)) {
            (self.heard)(id);
        }
        Ok(recall)
    }
}

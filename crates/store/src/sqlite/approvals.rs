//! Human approvals in SQLite. Consumption is one conditional UPDATE, so a replay or a
//! concurrent second recall can never run the tool twice.

use std::collections::BTreeMap;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use toolgate_domain::StoreError;
use toolgate_domain::approvals::{
    APPROVAL_TTL_SECS, Approval, ApprovalStatus, ArgumentBinding, Mint, PlanBinding, Recall, Review, ReviewRefusal,
    definition_of,
};
use toolgate_domain::secrets::random_hex;

use super::SqliteStore;
use crate::ApprovalStore;
use crate::rules::{CONSUMED_CONCURRENTLY, mint_refusal, plan_binding, recall_refusal, review_refusal};

type Result<T> = std::result::Result<T, StoreError>;

const COLUMNS: &str = "id, definition, tool, surface, submitter, canonical_args, status, submitted_at, expires_at, reviewer, reviewed_at, review_comment, consumed_at";

fn row(r: &rusqlite::Row) -> rusqlite::Result<Approval> {
    let status: String = r.get(6)?;
    Ok(Approval {
        id: r.get(0)?,
        definition: r.get(1)?,
        tool: r.get(2)?,
        surface: r.get(3)?,
        submitter: r.get(4)?,
        canonical_args: r.get(5)?,
        // The table's CHECK constraint admits only the four labels.
        status: ApprovalStatus::from_label(&status).unwrap_or(ApprovalStatus::Pending),
        submitted_at: r.get(7)?,
        expires_at: r.get(8)?,
        reviewer: r.get(9)?,
        reviewed_at: r.get(10)?,
        review_comment: r.get(11)?,
        consumed_at: r.get(12)?,
    })
}

fn by_id(conn: &Connection, id: &str) -> rusqlite::Result<Option<Approval>> {
    conn.query_row(&format!("SELECT {COLUMNS} FROM approval WHERE id = ?1"), params![id], row).optional()
}

fn approved_text(approved: &BTreeMap<String, String>) -> String {
    serde_json::to_string(approved).unwrap_or_default()
}

#[async_trait]
impl ApprovalStore for SqliteStore {
    async fn link_plan(&self, approval_id: &str, execution_id: &str) -> Result<()> {
        let (approval_id, execution_id) = (approval_id.to_string(), execution_id.to_string());
        self.run(move |c| {
            c.execute(
                "INSERT INTO approval_plan (approval_id, execution_id) VALUES (?1, ?2)
                 ON CONFLICT (approval_id) DO UPDATE SET execution_id = excluded.execution_id, approved = NULL",
                params![approval_id, execution_id],
            )
            .map(drop)
        })
        .await
    }

    async fn plan_of(&self, approval_id: &str) -> Result<Option<PlanBinding>> {
        let approval_id = approval_id.to_string();
        self.run(move |c| {
            c.query_row(
                "SELECT execution_id, approved FROM approval_plan WHERE approval_id = ?1",
                params![approval_id],
                |r| Ok(plan_binding(r.get(0)?, r.get(1)?)),
            )
            .optional()
        })
        .await
    }

    async fn bind_plans(&self, approval_id: &str, approved: &BTreeMap<String, String>) -> Result<bool> {
        let (approval_id, approved) = (approval_id.to_string(), approved_text(approved));
        self.run(move |c| {
            c.execute(
                "UPDATE approval_plan SET approved = ?2 WHERE approval_id = ?1
                 AND EXISTS (SELECT 1 FROM approval WHERE id = ?1 AND status = 'pending')",
                params![approval_id, approved],
            )
            .map(|n| n == 1)
        })
        .await
    }

    async fn approval(&self, id: &str) -> Result<Option<Approval>> {
        let id = id.to_string();
        self.run(move |c| by_id(c, &id)).await
    }

    async fn approvals(
        &self,
        status: Option<&str>,
        submitter: Option<&str>,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<Approval>> {
        let (status, submitter) = (status.map(str::to_string), submitter.map(str::to_string));
        self.run(move |c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {COLUMNS} FROM approval WHERE (?1 IS NULL OR status = ?1) AND (?2 IS NULL OR submitter = ?2)
                 ORDER BY submitted_at DESC, id LIMIT ?3 OFFSET ?4"
            ))?;
            stmt.query_map(params![status, submitter, limit, offset], row)?.collect()
        })
        .await
    }

    async fn mint(
        &self,
        surface: &str,
        tool: &str,
        submitter: &str,
        arguments: &ArgumentBinding,
        now: i64,
    ) -> Result<Mint> {
        let (surface, tool, submitter) = (surface.to_string(), tool.to_string(), submitter.to_string());
        let (canonical_args, digest) = (arguments.canonical.clone(), arguments.sensitive_digest.clone());
        let definition = definition_of(&tool);
        self.run(move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            // Expired pending tickets no longer count and may not be found again.
            tx.execute(
                "UPDATE approval SET status = 'rejected', review_comment = 'expired unreviewed' WHERE status = 'pending' AND expires_at <= ?1",
                params![now],
            )?;
            let existing = tx
                .query_row(
                    &format!("SELECT {COLUMNS} FROM approval WHERE status = 'pending' AND submitter = ?1 AND definition = ?2 AND canonical_args = ?3 AND sensitive_digest = ?4 AND surface = ?5"),
                    params![submitter, definition, canonical_args, digest, surface],
                    row,
                )
                .optional()?;
            if let Some(found) = existing {
                tx.commit()?;
                return Ok(Mint::Pending(Box::new(found)));
            }
            let mine: i64 = tx.query_row(
                "SELECT count(*) FROM approval WHERE status = 'pending' AND submitter = ?1",
                params![submitter],
                |r| r.get(0),
            )?;
            let all: i64 = tx.query_row("SELECT count(*) FROM approval WHERE status = 'pending'", [], |r| r.get(0))?;
            // Committed either way: the expiry above stands even when a cap refuses.
            if let Some(refusal) = mint_refusal(mine, all) {
                tx.commit()?;
                return Ok(refusal);
            }
            let id = random_hex::<16>();
            tx.execute(
                "INSERT INTO approval (id, definition, tool, surface, submitter, canonical_args, sensitive_digest, status, submitted_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', ?8, ?9)",
                params![id, definition, tool, surface, submitter, canonical_args, digest, now, now + APPROVAL_TTL_SECS],
            )?;
            let minted = by_id(&tx, &id)?.expect("just inserted");
            tx.commit()?;
            Ok(Mint::Pending(Box::new(minted)))
        })
        .await
    }

    async fn review(&self, review: Review<'_>) -> Result<std::result::Result<Approval, ReviewRefusal>> {
        let (id, reviewer, comment) =
            (review.id.to_string(), review.reviewer.to_string(), review.comment.map(str::to_string));
        let (approve, now) = (review.approve, review.now);
        self.run(move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let Some(a) = by_id(&tx, &id)? else { return Ok(Err(ReviewRefusal::Unknown(id))) };
            if let Some(refusal) = review_refusal(&a, &reviewer, now) {
                return Ok(Err(refusal));
            }
            let status = if approve { ApprovalStatus::Approved } else { ApprovalStatus::Rejected };
            tx.execute(
                "UPDATE approval SET status = ?2, reviewer = ?3, reviewed_at = ?4, review_comment = ?5, expires_at = ?6
                 WHERE id = ?1 AND status = 'pending'",
                params![id, status.label(), reviewer, now, comment, now + APPROVAL_TTL_SECS],
            )?;
            let decided = by_id(&tx, &id)?.expect("just updated");
            tx.commit()?;
            Ok(Ok(decided))
        })
        .await
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
        let (surface, id, caller, arguments) =
            (surface.to_string(), id.to_string(), caller.to_string(), arguments.clone());
        let definition = definition_of(tool);
        self.run(move |c| {
            let found = c
                .query_row(
                    &format!("SELECT {COLUMNS}, sensitive_digest FROM approval WHERE id = ?1"),
                    params![id],
                    |r| Ok((row(r)?, r.get::<_, String>(13)?)),
                )
                .optional()?;
            let Some((a, digest)) = found else { return Ok(Recall::Unknown) };
            if let Some(refusal) = recall_refusal(a, &digest, &definition, &surface, &arguments, &caller, now) {
                return Ok(refusal);
            }
            let changed = c.execute(
                "UPDATE approval SET status = 'consumed', consumed_at = ?2
                 WHERE id = ?1 AND status = 'approved' AND submitter = ?3 AND expires_at > ?2",
                params![id, now, caller],
            )?;
            if changed == 1 {
                Ok(Recall::Run(Box::new(by_id(c, &id)?.expect("just consumed"))))
            } else {
                Ok(CONSUMED_CONCURRENTLY)
            }
        })
        .await
    }
}

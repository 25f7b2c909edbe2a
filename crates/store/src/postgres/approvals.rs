//! Human approvals on PostgreSQL. Minting runs under one advisory lock (the caps count every
//! replica's tickets); a review locks its row; consumption is one conditional UPDATE, which
//! PostgreSQL re-checks after a concurrent one commits, so the tool runs once however many
//! replicas recall the ticket at the same moment.

use std::collections::BTreeMap;

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use toolgate_domain::StoreError;
use toolgate_domain::approvals::{
    APPROVAL_TTL_SECS, Approval, ApprovalStatus, ArgumentBinding, Mint, PlanBinding, Recall, Review, ReviewRefusal,
    definition_of,
};
use toolgate_domain::secrets::random_hex;

use super::{Pg, PgError, PostgresStore, execute, pg, row, rows};
use crate::ApprovalStore;
use crate::changes::Change;
use crate::rules::{CONSUMED_CONCURRENTLY, mint_refusal, plan_binding, recall_refusal, review_refusal};

type Result<T> = std::result::Result<T, StoreError>;

const COLUMNS: &str = "id, definition, tool, surface, submitter, canonical_args, status, submitted_at, expires_at, reviewer, reviewed_at, review_comment, consumed_at, sensitive_digest";

/// Serializes minting across replicas ("tg-mint").
const MINT_LOCK: i64 = 0x7467_6d69_6e74;

fn approval_row(r: &tokio_postgres::Row) -> Pg<Approval> {
    let status: String = r.try_get(6)?;
    Ok(Approval {
        id: r.try_get(0)?,
        definition: r.try_get(1)?,
        tool: r.try_get(2)?,
        surface: r.try_get(3)?,
        submitter: r.try_get(4)?,
        canonical_args: r.try_get(5)?,
        status: ApprovalStatus::from_label(&status)
            .ok_or_else(|| PgError::Invalid(format!("an approval has the unknown status {status:?}")))?,
        submitted_at: r.try_get(7)?,
        expires_at: r.try_get(8)?,
        reviewer: r.try_get(9)?,
        reviewed_at: r.try_get(10)?,
        review_comment: r.try_get(11)?,
        consumed_at: r.try_get(12)?,
    })
}

async fn by_id(c: &impl GenericClient, id: &str, lock: bool) -> Pg<Option<(Approval, String)>> {
    let sql = format!("SELECT {COLUMNS} FROM approval WHERE id = $1{}", if lock { " FOR UPDATE" } else { "" });
    match row(c, &sql, &[&id]).await? {
        Some(r) => Ok(Some((approval_row(&r)?, r.try_get(13)?))),
        None => Ok(None),
    }
}

fn just_written(found: Option<(Approval, String)>) -> Pg<Approval> {
    found.map(|(a, _)| a).ok_or_else(|| PgError::Invalid("an approval written in this transaction is gone".into()))
}

#[async_trait]
impl ApprovalStore for PostgresStore {
    async fn link_plan(&self, approval_id: &str, execution_id: &str) -> Result<()> {
        pg(async {
            let sql = "INSERT INTO approval_plan (approval_id, execution_id) VALUES ($1, $2)
                       ON CONFLICT (approval_id) DO UPDATE SET execution_id = excluded.execution_id, approved = NULL";
            execute(&*self.conn().await?, sql, &[&approval_id, &execution_id]).await.map(drop)
        })
        .await
    }

    async fn plan_of(&self, approval_id: &str) -> Result<Option<PlanBinding>> {
        pg(async {
            let sql = "SELECT execution_id, approved FROM approval_plan WHERE approval_id = $1";
            let found = row(&*self.conn().await?, sql, &[&approval_id]).await?;
            Ok(found.map(|r| plan_binding(r.get(0), r.get(1))))
        })
        .await
    }

    async fn bind_plans(&self, approval_id: &str, approved: &BTreeMap<String, String>) -> Result<bool> {
        let approved = serde_json::to_string(approved).unwrap_or_default();
        pg(async {
            let sql = "UPDATE approval_plan SET approved = $2 WHERE approval_id = $1
                       AND EXISTS (SELECT 1 FROM approval WHERE id = $1 AND status = 'pending')";
            Ok(execute(&*self.conn().await?, sql, &[&approval_id, &approved]).await? == 1)
        })
        .await
    }

    async fn approval(&self, id: &str) -> Result<Option<Approval>> {
        pg(async { Ok(by_id(&*self.conn().await?, id, false).await?.map(|(a, _)| a)) }).await
    }

    async fn approvals(
        &self,
        status: Option<&str>,
        submitter: Option<&str>,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<Approval>> {
        pg(async {
            let c = self.conn().await?;
            let sql = format!(
                "SELECT {COLUMNS} FROM approval WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR submitter = $2)
                 ORDER BY submitted_at DESC, id LIMIT $3 OFFSET $4"
            );
            rows(&*c, &sql, &[&status, &submitter, &limit, &offset]).await?.iter().map(approval_row).collect()
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
        let definition = definition_of(tool);
        let (canonical, digest) = (&arguments.canonical, &arguments.sensitive_digest);
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MINT_LOCK]).await?;
            // Expired pending tickets no longer count and may not be found again.
            execute(
                &tx,
                "UPDATE approval SET status = 'rejected', review_comment = 'expired unreviewed' WHERE status = 'pending' AND expires_at <= $1",
                &[&now],
            )
            .await?;
            let sql = format!(
                "SELECT {COLUMNS} FROM approval WHERE status = 'pending' AND submitter = $1 AND definition = $2 AND canonical_args = $3 AND sensitive_digest = $4 AND surface = $5"
            );
            if let Some(found) = row(&tx, &sql, &[&submitter, &definition, canonical, digest, &surface]).await? {
                let found = approval_row(&found)?;
                tx.commit().await?;
                return Ok(Mint::Pending(Box::new(found)));
            }
            let counts = row(
                &tx,
                "SELECT count(*) FILTER (WHERE submitter = $1), count(*) FROM approval WHERE status = 'pending'",
                &[&submitter],
            )
            .await?
            .ok_or_else(|| PgError::Invalid("a count returned no row".into()))?;
            let (mine, all): (i64, i64) = (counts.try_get(0)?, counts.try_get(1)?);
            // Committed either way: the expiry above stands even when a cap refuses.
            if let Some(refusal) = mint_refusal(mine, all) {
                tx.commit().await?;
                return Ok(refusal);
            }
            let id = random_hex::<16>();
            execute(
                &tx,
                "INSERT INTO approval (id, definition, tool, surface, submitter, canonical_args, sensitive_digest, status, submitted_at, expires_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9)",
                &[&id, &definition, &tool, &surface, &submitter, canonical, digest, &now, &(now + APPROVAL_TTL_SECS)],
            )
            .await?;
            let minted = just_written(by_id(&tx, &id, false).await?)?;
            tx.commit().await?;
            Ok(Mint::Pending(Box::new(minted)))
        })
        .await
    }

    async fn review(&self, review: Review<'_>) -> Result<std::result::Result<Approval, ReviewRefusal>> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            let Some((a, _)) = by_id(&tx, review.id, true).await? else {
                return Ok(Err(ReviewRefusal::Unknown(review.id.to_string())));
            };
            if let Some(refusal) = review_refusal(&a, review.reviewer, review.now) {
                return Ok(Err(refusal));
            }
            let status = if review.approve { ApprovalStatus::Approved } else { ApprovalStatus::Rejected };
            execute(
                &tx,
                "UPDATE approval SET status = $2, reviewer = $3, reviewed_at = $4, review_comment = $5, expires_at = $6
                 WHERE id = $1 AND status = 'pending'",
                &[
                    &review.id,
                    &status.label(),
                    &review.reviewer,
                    &review.now,
                    &review.comment,
                    &(review.now + APPROVAL_TTL_SECS),
                ],
            )
            .await?;
            let decided = just_written(by_id(&tx, review.id, false).await?)?;
            self.notify(&tx, Change::ApprovalChanged(decided.id.clone())).await?;
            tx.commit().await?;
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
        let definition = definition_of(tool);
        pg(async {
            let c = self.conn().await?;
            let Some((a, digest)) = by_id(&*c, id, false).await? else { return Ok(Recall::Unknown) };
            if let Some(refusal) = recall_refusal(a, &digest, &definition, surface, arguments, caller, now) {
                return Ok(refusal);
            }
            let consumed = row(
                &*c,
                &format!(
                    "UPDATE approval SET status = 'consumed', consumed_at = $2
                     WHERE id = $1 AND status = 'approved' AND submitter = $3 AND expires_at > $2 RETURNING {COLUMNS}"
                ),
                &[&id, &now, &caller],
            )
            .await?;
            match consumed {
                Some(r) => {
                    // Told after the consuming statement committed (it ran on its own).
                    self.notify(&*c, Change::ApprovalChanged(id.to_string())).await?;
                    Ok(Recall::Run(Box::new(approval_row(&r)?)))
                }
                None => Ok(CONSUMED_CONCURRENTLY),
            }
        })
        .await
    }
}

//! Human approvals: a ticket is minted by the first call of an approval-gated tool, decided by
//! a person, and consumed exactly once by the recall. Consumption is one conditional UPDATE,
//! so a replay or a concurrent second recall can never run the tool twice.

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::{Store, StoreError, hex, random_bytes};

/// A ticket lives this long: from submission while pending, from review once approved.
pub const APPROVAL_TTL_SECS: i64 = 7 * 24 * 3600;
pub const MAX_PENDING_PER_SUBMITTER: i64 = 25;
pub const MAX_PENDING_TOTAL: i64 = 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalStatus {
    Pending,
    Approved,
    Rejected,
    Consumed,
}

impl ApprovalStatus {
    fn parse(s: &str) -> Self {
        match s {
            "approved" => Self::Approved,
            "rejected" => Self::Rejected,
            "consumed" => Self::Consumed,
            _ => Self::Pending,
        }
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

/// What minting did.
#[derive(Debug, PartialEq, Eq)]
pub enum Mint {
    /// A new pending ticket, or the same one again for the same submitter, tool and arguments.
    Pending(Approval),
    TooManyForSubmitter,
    TooManyInAll,
}

/// What a recall found.
#[derive(Debug, PartialEq, Eq)]
pub enum Recall {
    /// Consumed by this call: run the tool.
    Run(Approval),
    StillPending(Approval),
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

const COLUMNS: &str = "id, definition, tool, surface, submitter, canonical_args, status, submitted_at, expires_at, reviewer, reviewed_at, review_comment, consumed_at";

fn row(r: &rusqlite::Row) -> rusqlite::Result<Approval> {
    Ok(Approval {
        id: r.get(0)?,
        definition: r.get(1)?,
        tool: r.get(2)?,
        surface: r.get(3)?,
        submitter: r.get(4)?,
        canonical_args: r.get(5)?,
        status: ApprovalStatus::parse(&r.get::<_, String>(6)?),
        submitted_at: r.get(7)?,
        expires_at: r.get(8)?,
        reviewer: r.get(9)?,
        reviewed_at: r.get(10)?,
        review_comment: r.get(11)?,
        consumed_at: r.get(12)?,
    })
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

impl Store {
    pub fn approval(&self, id: &str) -> Result<Option<Approval>, StoreError> {
        Ok(self
            .conn()?
            .query_row(&format!("SELECT {COLUMNS} FROM approval WHERE id = ?1"), params![id], row)
            .optional()?)
    }

    /// Approvals, newest first; filtered by status and submitter when given.
    pub fn approvals(
        &self,
        status: Option<&str>,
        submitter: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Approval>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(&format!(
            "SELECT {COLUMNS} FROM approval WHERE (?1 IS NULL OR status = ?1) AND (?2 IS NULL OR submitter = ?2)
             ORDER BY submitted_at DESC, id LIMIT ?3"
        ))?;
        let rows = stmt.query_map(params![status, submitter, limit], row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Mints (or finds again) the pending ticket for this submitter, tool and arguments.
    pub fn mint_approval(
        &self,
        tool: &str,
        submitter: &str,
        canonical_args: &str,
        now: i64,
    ) -> Result<Mint, StoreError> {
        let definition = format!("mcp.{tool}");
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        // Expired pending tickets no longer count and may not be found again.
        tx.execute("UPDATE approval SET status = 'rejected', review_comment = 'expired unreviewed' WHERE status = 'pending' AND expires_at <= ?1", params![now])?;
        let existing = tx
            .query_row(
                &format!("SELECT {COLUMNS} FROM approval WHERE status = 'pending' AND submitter = ?1 AND definition = ?2 AND canonical_args = ?3"),
                params![submitter, definition, canonical_args],
                row,
            )
            .optional()?;
        if let Some(found) = existing {
            return Ok(Mint::Pending(found));
        }
        let mine: i64 = tx.query_row(
            "SELECT count(*) FROM approval WHERE status = 'pending' AND submitter = ?1",
            params![submitter],
            |r| r.get(0),
        )?;
        if mine >= MAX_PENDING_PER_SUBMITTER {
            return Ok(Mint::TooManyForSubmitter);
        }
        let all: i64 = tx.query_row("SELECT count(*) FROM approval WHERE status = 'pending'", [], |r| r.get(0))?;
        if all >= MAX_PENDING_TOTAL {
            return Ok(Mint::TooManyInAll);
        }
        let id = hex(&random_bytes::<16>());
        tx.execute(
            "INSERT INTO approval (id, definition, tool, surface, submitter, canonical_args, status, submitted_at, expires_at)
             VALUES (?1, ?2, ?3, 'mcp', ?4, ?5, 'pending', ?6, ?7)",
            params![id, definition, tool, submitter, canonical_args, now, now + APPROVAL_TTL_SECS],
        )?;
        let minted = tx.query_row(&format!("SELECT {COLUMNS} FROM approval WHERE id = ?1"), params![id], row)?;
        tx.commit()?;
        Ok(Mint::Pending(minted))
    }

    /// A person approves or rejects; never their own request.
    pub fn review_approval(
        &self,
        id: &str,
        reviewer: &str,
        approve: bool,
        comment: Option<&str>,
        now: i64,
    ) -> Result<Result<Approval, ReviewRefusal>, StoreError> {
        let Some(a) = self.approval(id)? else { return Ok(Err(ReviewRefusal::Unknown(id.into()))) };
        if a.submitter == reviewer {
            return Ok(Err(ReviewRefusal::OwnRequest(reviewer.into())));
        }
        if a.status != ApprovalStatus::Pending {
            return Ok(Err(ReviewRefusal::NotPending(a.status.label())));
        }
        if a.expired(now) {
            return Ok(Err(ReviewRefusal::Expired));
        }
        let status = if approve { "approved" } else { "rejected" };
        let changed = self.conn()?.execute(
            "UPDATE approval SET status = ?2, reviewer = ?3, reviewed_at = ?4, review_comment = ?5, expires_at = ?6
             WHERE id = ?1 AND status = 'pending'",
            params![id, status, reviewer, now, comment, now + APPROVAL_TTL_SECS],
        )?;
        if changed != 1 {
            return Ok(Err(ReviewRefusal::NotPending("decided meanwhile")));
        }
        Ok(Ok(self.approval(id)?.expect("just updated")))
    }

    /// The recall: checks the ticket against this exact call and consumes it atomically.
    pub fn recall_approval(
        &self,
        id: &str,
        tool: &str,
        caller: &str,
        canonical_args: &str,
        now: i64,
    ) -> Result<Recall, StoreError> {
        let Some(a) = self.approval(id)? else { return Ok(Recall::Unknown) };
        if a.definition != format!("mcp.{tool}") || a.canonical_args != canonical_args {
            return Ok(Recall::Mismatch);
        }
        if a.submitter != caller {
            return Ok(Recall::NotRedeemable { why: "another principal's approval" });
        }
        if a.surface != "mcp" {
            return Ok(Recall::NotRedeemable { why: "not minted by the MCP surface" });
        }
        match a.status {
            ApprovalStatus::Rejected => return Ok(Recall::Rejected),
            ApprovalStatus::Consumed => return Ok(Recall::NotRedeemable { why: "already consumed (replay)" }),
            _ if a.expired(now) => return Ok(Recall::Expired),
            ApprovalStatus::Pending => return Ok(Recall::StillPending(a)),
            ApprovalStatus::Approved => {}
        }
        let changed = self.conn()?.execute(
            "UPDATE approval SET status = 'consumed', consumed_at = ?2
             WHERE id = ?1 AND status = 'approved' AND submitter = ?3 AND expires_at > ?2",
            params![id, now, caller],
        )?;
        if changed == 1 {
            Ok(Recall::Run(self.approval(id)?.expect("just consumed")))
        } else {
            Ok(Recall::NotRedeemable { why: "consumed by a concurrent recall" })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mint_dedup_review_consume_once() {
        let store = Store::open_in_memory().unwrap();
        let Mint::Pending(a) = store.mint_approval("delete_tag", "alice", "{\"k\":1}", 100).unwrap() else { panic!() };
        let Mint::Pending(again) = store.mint_approval("delete_tag", "alice", "{\"k\":1}", 101).unwrap() else {
            panic!()
        };
        assert_eq!(a.id, again.id, "deduplicated while pending");
        assert_eq!(
            store.recall_approval(&a.id, "delete_tag", "alice", "{\"k\":1}", 102).unwrap(),
            Recall::StillPending(a.clone())
        );
        assert_eq!(
            store.review_approval(&a.id, "alice", true, None, 103).unwrap(),
            Err(ReviewRefusal::OwnRequest("alice".into()))
        );
        assert!(store.review_approval(&a.id, "bob", true, Some("ok"), 104).unwrap().is_ok());
        assert_eq!(store.recall_approval(&a.id, "delete_tag", "alice", "{\"k\":2}", 105).unwrap(), Recall::Mismatch);
        assert!(matches!(
            store.recall_approval(&a.id, "delete_tag", "mallory", "{\"k\":1}", 105).unwrap(),
            Recall::NotRedeemable { .. }
        ));
        assert!(matches!(
            store.recall_approval(&a.id, "delete_tag", "alice", "{\"k\":1}", 106).unwrap(),
            Recall::Run(_)
        ));
        assert!(matches!(
            store.recall_approval(&a.id, "delete_tag", "alice", "{\"k\":1}", 107).unwrap(),
            Recall::NotRedeemable { .. }
        ));
    }

    #[test]
    fn expiry_and_caps() {
        let store = Store::open_in_memory().unwrap();
        let Mint::Pending(a) = store.mint_approval("t", "alice", "{}", 0).unwrap() else { panic!() };
        store.review_approval(&a.id, "bob", true, None, APPROVAL_TTL_SECS - 1).unwrap().unwrap();
        // Approved: the week runs from the review.
        assert!(matches!(
            store.recall_approval(&a.id, "t", "alice", "{}", 2 * APPROVAL_TTL_SECS - 2).unwrap(),
            Recall::Run(_)
        ));
        let Mint::Pending(b) = store.mint_approval("t", "alice", "{}", 0).unwrap() else { panic!() };
        store.review_approval(&b.id, "bob", true, None, 10).unwrap().unwrap();
        assert_eq!(store.recall_approval(&b.id, "t", "alice", "{}", 10 + APPROVAL_TTL_SECS).unwrap(), Recall::Expired);
        for i in 0..MAX_PENDING_PER_SUBMITTER {
            assert!(matches!(
                store.mint_approval("t", "carol", &format!("{{\"i\":{i}}}"), 1).unwrap(),
                Mint::Pending(_)
            ));
        }
        assert_eq!(store.mint_approval("t", "carol", "{\"i\":99}", 1).unwrap(), Mint::TooManyForSubmitter);
    }
}

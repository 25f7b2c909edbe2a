//! The decisions every backend takes the same way on a record it has read, written once so
//! that SQLite and PostgreSQL cannot drift apart. The backend keeps what only it can do: the
//! reading, and the one conditional write that makes each decision stick under concurrency.

use toolgate_domain::approvals::{
    Approval, ApprovalStatus, ArgumentBinding, MAX_PENDING_PER_SUBMITTER, MAX_PENDING_TOTAL, Mint, PlanBinding, Recall,
    ReviewRefusal,
};
use toolgate_domain::fleet::agent::{AgentAuth, ENROLL_SECRET_PREFIX};
use toolgate_domain::fleet::{EnrollRefusal, EnrollmentToken};
use toolgate_domain::lockout::{Attempt, locked_until};
use toolgate_domain::records::KillSwitch;
use toolgate_domain::secrets::{new_secret, random_hex};
use toolgate_domain::tokens::{Authentication, TokenRecord};

/// What a recall of `a` (stored with the sensitive-value `digest`) gets instead of running,
/// or None when it may consume the ticket.
pub(crate) fn recall_refusal(
    a: Approval,
    digest: &str,
    definition: &str,
    surface: &str,
    arguments: &ArgumentBinding,
    caller: &str,
    now: i64,
) -> Option<Recall> {
    if a.definition != definition || a.canonical_args != arguments.canonical || digest != arguments.sensitive_digest {
        return Some(Recall::Mismatch);
    }
    if a.submitter != caller {
        return Some(Recall::NotRedeemable { why: "another principal's approval" });
    }
    if a.surface != surface {
        return Some(Recall::NotRedeemable { why: "minted by another surface" });
    }
    match a.status {
        ApprovalStatus::Rejected => Some(Recall::Rejected),
        ApprovalStatus::Consumed => Some(Recall::NotRedeemable { why: "already consumed (replay)" }),
        _ if a.expired(now) => Some(Recall::Expired),
        ApprovalStatus::Pending => Some(Recall::StillPending(Box::new(a))),
        ApprovalStatus::Approved => None,
    }
}

/// The answer of a recall whose conditional consumption changed no row.
pub(crate) const CONSUMED_CONCURRENTLY: Recall = Recall::NotRedeemable { why: "consumed by a concurrent recall" };

/// Why `reviewer` may not decide `a` now, if they may not.
pub(crate) fn review_refusal(a: &Approval, reviewer: &str, now: i64) -> Option<ReviewRefusal> {
    if a.submitter == reviewer {
        Some(ReviewRefusal::OwnRequest(reviewer.to_string()))
    } else if a.status != ApprovalStatus::Pending {
        Some(ReviewRefusal::NotPending(a.status.label()))
    } else if a.expired(now) {
        Some(ReviewRefusal::Expired)
    } else {
        None
    }
}

/// The cap a new ticket would break, given the pending tickets of its submitter and in all.
pub(crate) fn mint_refusal(mine: i64, all: i64) -> Option<Mint> {
    if mine >= MAX_PENDING_PER_SUBMITTER {
        Some(Mint::TooManyForSubmitter)
    } else if all >= MAX_PENDING_TOTAL {
        Some(Mint::TooManyInAll)
    } else {
        None
    }
}

/// Why an enrollment token may not enroll one more agent now, if it may not.
pub(crate) fn enroll_refusal(token: &EnrollmentToken, now_ms: i64) -> Option<EnrollRefusal> {
    if token.expires_at_ms <= now_ms {
        Some(EnrollRefusal::Expired)
    } else if token.uses >= token.uses_allowed {
        Some(EnrollRefusal::UsedUp)
    } else {
        None
    }
}

/// A found token that may not authenticate: revoked or expired.
pub(crate) fn token_refusal(token: &TokenRecord, now: i64) -> Option<Authentication> {
    if token.revoked_at.is_some() {
        Some(Authentication::Revoked)
    } else if token.expires_at <= now {
        Some(Authentication::Expired)
    } else {
        None
    }
}

/// An agent's credential check against what is stored (None: no such agent).
pub(crate) fn agent_auth(stored: Option<(String, Option<i64>)>, given_hash: &str) -> AgentAuth {
    match stored {
        None => AgentAuth::Unknown,
        Some((_, Some(_))) => AgentAuth::Revoked,
        Some((hash, None)) if hash == given_hash => AgentAuth::Valid,
        Some(_) => AgentAuth::BadCredential,
    }
}

/// A new enrollment token and its secret (the store keeps only the secret's hash).
pub(crate) fn new_enrollment_token(expires_at_ms: i64, uses_allowed: i64, now_ms: i64) -> (EnrollmentToken, String) {
    let token = EnrollmentToken {
        id: format!("enr_{}", random_hex::<8>()),
        created_at_ms: now_ms,
        expires_at_ms,
        uses_allowed,
        uses: 0,
    };
    (token, new_secret(ENROLL_SECRET_PREFIX))
}

/// The engaged switches' query: `action` '' is the whole plugin's.
pub(crate) const ENGAGED_KILL_SWITCHES: &str = "SELECT plugin, action, reason, updated_at, updated_by FROM plugin_kill_switch \
     WHERE engaged ORDER BY plugin, action";

/// An engaged switch from its row: (plugin, action or '', reason, when, by whom).
pub(crate) fn engaged_kill_switch(
    (plugin, action, reason, at, by): (String, String, Option<String>, i64, String),
) -> KillSwitch {
    let action = Some(action).filter(|a| !a.is_empty());
    KillSwitch { plugin, action, enabled: true, reason, updated_at: Some(at), updated_by: Some(by) }
}

/// A kill switch as stored, or off when it was never set: (engaged, reason, when, by whom).
pub(crate) fn kill_switch(
    plugin: &str,
    action: Option<&str>,
    stored: Option<(bool, Option<String>, i64, String)>,
) -> KillSwitch {
    let (enabled, reason, updated_at, updated_by) = match stored {
        Some((engaged, reason, at, by)) => (engaged, reason, Some(at), Some(by)),
        None => (false, None, None, None),
    };
    KillSwitch {
        plugin: plugin.to_string(),
        action: action.map(str::to_string),
        enabled,
        reason,
        updated_at,
        updated_by,
    }
}

/// An attempt to prove who one is, on the principal's row as read under its lock (`failed`
/// in a row, locked until `locked_until_ms`): refused while locked, else counted, with the
/// lock it brings on. What to write, (failures, locked until), when it is counted.
pub(crate) fn count_attempt(failed: i64, locked_until_ms: i64, now_ms: i64) -> (Attempt, Option<(i64, i64)>) {
    if locked_until_ms > now_ms {
        return (Attempt::Locked { until_ms: locked_until_ms }, None);
    }
    let failures = failed + 1;
    (Attempt::Counted { failures }, Some((failures, locked_until(failures, now_ms))))
}

/// Why a result for a target in `status` (with `stored` steps already) is not taken, or None
/// when it is: only a target that was sent the run and is still open (`running`) takes one.
pub(crate) fn result_refusal(status: &str, stored: i64) -> Option<crate::fleet_work::Taken> {
    use crate::fleet_work::Taken;
    match (status, stored) {
        (_, 1..) => Some(Taken::AlreadyFinal),
        ("running", _) => None,
        _ => Some(Taken::NotOpen),
    }
}

/// An idempotency key found on an execution already (with `digest` of its arguments): what
/// creating another under it with `wanted` (the new arguments' digest) comes to.
pub(crate) fn existing_execution(
    execution_id: String,
    digest: Option<&str>,
    wanted: &str,
) -> crate::fleet_work::Created {
    crate::fleet_work::Created::Existing { execution_id, same_arguments: digest == Some(wanted) }
}

/// A stored plan binding; an approved map that cannot be read binds nothing (no agent applies).
pub(crate) fn plan_binding(execution_id: String, approved: Option<String>) -> PlanBinding {
    let approved = approved.map(|text| serde_json::from_str(&text).unwrap_or_default());
    PlanBinding { execution_id, approved }
}

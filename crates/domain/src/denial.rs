//! Every reason the gate refuses a call, typed. Each says what happened, what to do next and
//! whether retrying helps; the MCP layer maps each to its JSON-RPC code.

use std::sync::Arc;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::StoreError;
use crate::approvals::{APPROVAL_TTL_SECS, Approval, MAX_PENDING_PER_SUBMITTER, MAX_PENDING_TOTAL};
use crate::audit::AuditOutcome;

/// Retrying an approval-required call helps once a human had time to decide.
pub const RETRY_AFTER_APPROVAL_MS: u64 = 30_000;
/// Retrying after a transient store fault.
pub const RETRY_AFTER_STORE_FAULT_MS: u64 = 5_000;

/// A replay, a concurrent loser and another principal's ticket all read alike to the caller.
const NOT_REDEEMABLE: &str = "this approval cannot be redeemed: it was already used, or it is not yours";

#[derive(Debug)]
pub enum Denial {
    /// `--read-only`: only read-class tools run.
    ReadOnlyMode { tool: &'static str },
    /// The token's tier does not allow the tool's pair.
    Tier { tool: &'static str, tier: String, pair: String, allowed_in: Vec<&'static str> },
    /// No role of the principal grants the tool's pair.
    NotGranted { tool: &'static str, pair: String },
    /// The tool's own deciding check (tools.yaml `authorization`) is not met: `requirement`
    /// says what it needs ("the fleet-wide role Administrator", "the role ITServiceOwner on ...").
    RoleRequired { tool: &'static str, requirement: String },
    /// The arguments break the inputSchema.
    InvalidArguments(InvalidArguments),
    /// A ticket waits for a person (just minted, or recalled too early).
    ApprovalPending { approval: Box<Approval>, minted: bool },
    /// Too many tickets are pending.
    ApprovalCap(ApprovalCap),
    /// The recall named a ticket this call cannot redeem.
    NotRedeemable { approval_id: String, why: RecallRefusal },
    /// The tool's precondition (tools.yaml `precondition`) does not hold against the live
    /// state: nothing is minted or consumed, a ticket the call names stays recallable.
    /// `recall`: the call named one.
    Precondition { tool: &'static str, reason: String, recall: bool },
    /// The store failed while the gate asked it something.
    StoreFault { what: &'static str, error: StoreError },
    /// The tool's schema did not compile on first use (the build's check should have refused
    /// it: a bug, never the caller's fault).
    SchemaFault { tool: &'static str, why: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalCap {
    Submitter,
    Server,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecallRefusal {
    Unknown,
    Mismatch,
    /// Consumed, another principal's, or not minted for tool calls; `why` is for audit only.
    Used {
        why: &'static str,
    },
    Rejected,
    Expired,
}

impl RecallRefusal {
    /// Its name in metrics (`toolgate_approval_recalls_refused_total{reason}`).
    pub fn label(self) -> &'static str {
        match self {
            RecallRefusal::Unknown => "unknown",
            RecallRefusal::Mismatch => "mismatch",
            RecallRefusal::Used { .. } => "not_redeemable",
            RecallRefusal::Rejected => "rejected",
            RecallRefusal::Expired => "expired",
        }
    }
}

/// One problem with the arguments: where (JSON pointer) and what.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ArgumentProblem {
    pub pointer: String,
    pub message: String,
}

/// What every invalid-arguments answer for one tool says besides its problems, computed once
/// per tool when the server starts (an invalid call then copies nothing of it).
#[derive(Debug)]
pub struct ArgumentHints {
    /// The schema's `required` list, as JSON.
    required: Box<RawValue>,
    /// A minimal valid `arguments` object as JSON, or `null`.
    example: Box<RawValue>,
    pub remediation: String,
    /// `remediation` as a JSON string.
    remediation_json: Box<RawValue>,
}

/// `value` as JSON (a `Value` or a `str` always serializes).
fn raw(value: &(impl Serialize + ?Sized)) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

impl ArgumentHints {
    /// Made once per tool, serialized once: every refusal of the tool repeats them as they are.
    pub fn new(required: Value, example: Option<Value>) -> Self {
        let remediation = match &example {
            Some(e) => format!("fix the arguments named above; required: {required}; a minimal valid call: {e}"),
            None => format!("fix the arguments named above; required: {required}"),
        };
        Self { required: raw(&required), example: raw(&example), remediation_json: raw(&remediation), remediation }
    }
}

#[derive(Clone, Debug)]
pub struct InvalidArguments {
    pub tool: &'static str,
    pub problems: Vec<ArgumentProblem>,
    pub hints: Arc<ArgumentHints>,
}

/// The structured details of an invalid-arguments answer, serialized as they are (no JSON
/// tree is built for them).
#[derive(Serialize)]
pub struct InvalidArgumentsDetails<'a> {
    error: &'static str,
    errors: &'a [ArgumentProblem],
    required: &'a RawValue,
    example: &'a RawValue,
    correlation_id: &'a str,
    retry_after_ms: Option<u64>,
    remediation: &'a RawValue,
}

impl InvalidArguments {
    pub fn message(&self) -> String {
        let mut message = format!("invalid arguments for {}: ", self.tool);
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                message.push_str("; ");
            }
            message.push_str(if p.pointer.is_empty() { "(arguments)" } else { &p.pointer });
            message.push_str(": ");
            message.push_str(&p.message);
        }
        message
    }

    pub fn remediation(&self) -> &str {
        &self.hints.remediation
    }

    /// The structured details a client (or a model) can act on.
    pub fn details<'a>(&'a self, correlation_id: &'a str) -> InvalidArgumentsDetails<'a> {
        InvalidArgumentsDetails {
            error: "invalid_arguments",
            errors: &self.problems,
            required: &self.hints.required,
            example: &self.hints.example,
            correlation_id,
            retry_after_ms: None,
            remediation: &self.hints.remediation_json,
        }
    }
}

impl Denial {
    pub fn message(&self) -> String {
        match self {
            Denial::ReadOnlyMode { tool } => format!("the server is in read-only mode: {tool} changes state"),
            Denial::Tier { tool, tier, pair, .. } => format!("tier `{tier}` may not call {tool} ({pair})"),
            Denial::NotGranted { pair, .. } => format!("the caller's roles do not grant {pair}"),
            Denial::RoleRequired { tool, requirement } => format!("{tool} needs {requirement}"),
            Denial::InvalidArguments(invalid) => invalid.message(),
            Denial::ApprovalPending { approval: a, .. } => {
                format!("{} needs a human's approval; approval {} is pending", a.tool, a.id)
            }
            Denial::ApprovalCap(ApprovalCap::Submitter) => {
                format!("you have {MAX_PENDING_PER_SUBMITTER} approvals pending, the most one principal may have")
            }
            Denial::ApprovalCap(ApprovalCap::Server) => {
                format!("{MAX_PENDING_TOTAL} approvals are pending server-wide, the most it keeps")
            }
            Denial::NotRedeemable { why, .. } => match why {
                RecallRefusal::Unknown => "no such approval".into(),
                RecallRefusal::Mismatch => {
                    "the approval does not match this call: it was granted for another tool or other arguments".into()
                }
                RecallRefusal::Used { .. } => NOT_REDEEMABLE.into(),
                RecallRefusal::Rejected => "the approval was rejected".into(),
                RecallRefusal::Expired => format!("the approval expired ({} days)", APPROVAL_TTL_SECS / 86_400),
            },
            Denial::Precondition { reason, recall: true, .. } => {
                format!("approval cannot be redeemed right now: {reason}; the ticket stays unconsumed")
            }
            Denial::Precondition { tool, reason, recall: false } => format!("{tool} cannot run now: {reason}"),
            Denial::StoreFault { what, error } => format!("the {what} store failed: {error}"),
            Denial::SchemaFault { tool, .. } => format!("the inputSchema of {tool} does not compile on this server"),
        }
    }

    /// The next step for the caller.
    pub fn remediation(&self) -> String {
        match self {
            Denial::ReadOnlyMode { .. } => {
                "only read-class tools run while the server is read-only; ask its operator".into()
            }
            Denial::Tier { pair, allowed_in, .. } => {
                format!("use a token of a tier that allows {pair}: {}", allowed_in.join(", "))
            }
            Denial::NotGranted { tool, pair } => {
                format!("ask an administrator for a role that grants {pair} (`toolgate explain {tool}` lists them)")
            }
            Denial::RoleRequired { tool, .. } => {
                format!("ask an administrator for it (`toolgate explain {tool}` says what decides this tool)")
            }
            Denial::InvalidArguments(invalid) => invalid.remediation().to_string(),
            Denial::ApprovalPending { approval: a, .. } => format!(
                "ask a reviewer to approve {} on the approver's console (/console); poll status_url meanwhile, then call again with the same arguments plus \"approval_id\": \"{}\"",
                a.id, a.id
            ),
            Denial::ApprovalCap(ApprovalCap::Submitter) => {
                "wait for reviewers to decide some of them (list_pending_approvals shows them)".into()
            }
            Denial::ApprovalCap(ApprovalCap::Server) => "wait for reviewers to work through the queue".into(),
            Denial::NotRedeemable { why, .. } => match why {
                RecallRefusal::Unknown => "call without approval_id to request one".into(),
                RecallRefusal::Mismatch => {
                    "call with exactly the tool and arguments that were approved, or request a new approval".into()
                }
                RecallRefusal::Rejected => "ask the reviewer why, or request a new approval".into(),
                RecallRefusal::Used { .. } | RecallRefusal::Expired => {
                    "request a new approval by calling without approval_id".into()
                }
            },
            Denial::Precondition { tool, .. } => {
                format!(
                    "calling again will not help until the state it names changes (`toolgate explain {tool}` says what it checks)"
                )
            }
            Denial::StoreFault { .. } => "retry in a few seconds".into(),
            Denial::SchemaFault { .. } => {
                "tell the server's operator: `toolgate check` names the schema; calling again will not help".into()
            }
        }
    }

    /// `None` when retrying cannot help.
    pub fn retry_after_ms(&self) -> Option<u64> {
        match self {
            Denial::ApprovalPending { .. } | Denial::ApprovalCap(_) => Some(RETRY_AFTER_APPROVAL_MS),
            Denial::StoreFault { .. } => Some(RETRY_AFTER_STORE_FAULT_MS),
            _ => None,
        }
    }

    /// Fields a client needs beyond the message (the ticket to poll and redeem).
    pub fn data(&self) -> Option<Value> {
        match self {
            Denial::ApprovalPending { approval: a, .. } => {
                Some(json!({"approval_id": a.id, "status_url": format!("/api/v1/approvals/{}", a.id)}))
            }
            _ => None,
        }
    }

    pub fn audit_outcome(&self) -> AuditOutcome {
        match self {
            Denial::ApprovalPending { .. } => AuditOutcome::Pending,
            _ => AuditOutcome::Denied,
        }
    }

    /// What the audit row says: it may tell apart what the caller is told alike.
    pub fn audit_detail(&self, code: i64) -> String {
        match self {
            Denial::ApprovalPending { approval, minted } => {
                format!("approval {} {}", approval.id, if *minted { "minted" } else { "pending" })
            }
            Denial::ApprovalCap(ApprovalCap::Submitter) => "refused: submitter's pending cap".into(),
            Denial::ApprovalCap(ApprovalCap::Server) => "refused: global pending cap".into(),
            Denial::NotRedeemable { approval_id: id, why } => match why {
                RecallRefusal::Unknown => format!("unknown approval {id}"),
                RecallRefusal::Mismatch => format!("approval {id} does not match"),
                RecallRefusal::Used { why } => format!("approval {id}: {why}"),
                RecallRefusal::Rejected => format!("approval {id} rejected"),
                RecallRefusal::Expired => format!("approval {id} expired"),
            },
            Denial::StoreFault { error, .. } => format!("store fault: {error}"),
            Denial::SchemaFault { why, .. } => format!("schema fault: {why}"),
            Denial::InvalidArguments(invalid) => invalid.message(),
            _ => format!("{code}: {}", self.message()),
        }
    }
}

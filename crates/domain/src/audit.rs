//! The audit log's rows: one per tools/call outcome, review, session event and authentication
//! failure. Built with [`AuditEvent::new`] and its setters, never field by field.

use serde::{Deserialize, Serialize};

use crate::Caller;

/// How an audited action ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuditOutcome {
    Success,
    Denied,
    Failure,
    /// A ticket was minted or is still waiting for a person.
    Pending,
    Approved,
}

impl AuditOutcome {
    pub fn label(self) -> &'static str {
        match self {
            AuditOutcome::Success => "success",
            AuditOutcome::Denied => "denied",
            AuditOutcome::Failure => "failure",
            AuditOutcome::Pending => "pending",
            AuditOutcome::Approved => "approved",
        }
    }
}

/// What an audit row's `target` names (the seeds' `target_type`), so a reader can filter
/// session rows from agent rows without parsing the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetType {
    /// An MCP session id: `session.*` rows, and a stream that belongs to a session.
    McpSession,
    /// A JSON-RPC request id: a call's stream outside any session.
    McpRequest,
    /// A tool call's canonical arguments (sensitive ones redacted).
    ToolArguments,
    /// A resource URI or prompt name read over MCP.
    McpResource,
    /// One step of a bundle execution (`<execution id>#<step>`).
    BundleStep,
    /// An approval ticket's id.
    ApprovalTicket,
    /// The client address an authentication failure came from.
    ClientAddress,
    /// A principal's name (console and CLI account actions).
    Principal,
    /// A management group's id (its creation, changes, members and roles).
    ManagementGroup,
    /// An access review campaign's id (its opening, decisions, revocations, closing, export).
    AccessReview,
    /// An upload grant's id (minted, used, refused, revoked, its content deleted).
    UploadGrant,
    /// An agent certificate's serial (issued, revoked).
    Certificate,
    /// An execution's id: a change's outcome on one agent (the row is about that agent).
    Execution,
}

impl TargetType {
    /// Every kind, in the order `query_audit_log`'s `target_type` enum lists them.
    pub const ALL: [TargetType; 13] = [
        TargetType::McpSession,
        TargetType::McpRequest,
        TargetType::ToolArguments,
        TargetType::McpResource,
        TargetType::BundleStep,
        TargetType::ApprovalTicket,
        TargetType::ClientAddress,
        TargetType::Principal,
        TargetType::ManagementGroup,
        TargetType::AccessReview,
        TargetType::UploadGrant,
        TargetType::Certificate,
        TargetType::Execution,
    ];

    pub fn label(self) -> &'static str {
        match self {
            TargetType::McpSession => "McpSession",
            TargetType::McpRequest => "McpRequest",
            TargetType::ToolArguments => "ToolArguments",
            TargetType::McpResource => "McpResource",
            TargetType::BundleStep => "BundleStep",
            TargetType::ApprovalTicket => "ApprovalTicket",
            TargetType::ClientAddress => "ClientAddress",
            TargetType::Principal => "Principal",
            TargetType::ManagementGroup => "ManagementGroup",
            TargetType::AccessReview => "AccessReview",
            TargetType::UploadGrant => "UploadGrant",
            TargetType::Certificate => "Certificate",
            TargetType::Execution => "Execution",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEvent {
    pub at_ms: i64,
    pub principal: Option<String>,
    pub token_id: Option<String>,
    /// `mcp.<tool>`, `session.open`, `session.close`, `auth.failure`, `approval.review`.
    pub action: String,
    pub target: Option<String>,
    /// What kind of thing `target` names (a [`TargetType`] label), set with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_type: Option<String>,
    /// An [`AuditOutcome`] label.
    pub result: String,
    pub detail: Option<String>,
    pub correlation_id: Option<String>,
    /// The replica that wrote the row, when several share one database (set by the store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// The agents the row is about (those a call named by id), sorted, each once: a reader
    /// confined to some groups reads another principal's row only when they are all its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
}

impl AuditEvent {
    pub fn new(at_ms: i64, action: impl Into<String>, outcome: AuditOutcome) -> Self {
        Self {
            at_ms,
            principal: None,
            token_id: None,
            action: action.into(),
            target: None,
            target_type: None,
            result: outcome.label().to_string(),
            detail: None,
            correlation_id: None,
            replica: None,
            agents: Vec::new(),
        }
    }

    /// The caller and the token it came with.
    pub fn by(mut self, caller: &Caller) -> Self {
        self.principal = Some(caller.principal.name.clone());
        self.token_id = Some(caller.token_id.clone());
        self
    }

    /// A principal acting without a token (the console, a reviewer).
    pub fn by_principal(mut self, name: &str) -> Self {
        self.principal = Some(name.to_string());
        self
    }

    /// What the row is about, and what kind of thing that is: a target never goes untyped.
    pub fn target(mut self, kind: TargetType, target: impl Into<String>) -> Self {
        self.target = Some(target.into());
        self.target_type = Some(kind.label().to_string());
        self
    }

    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    pub fn correlation(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = Some(id.into());
        self
    }

    /// The agents the row is about; at most [`MAX_ROW_AGENTS`] are kept (a row about more is
    /// then about some agent nobody confined sees whole, so only fleet-wide readers and its
    /// own principal read it).
    pub fn about_agents(mut self, agents: impl IntoIterator<Item = String>) -> Self {
        let mut agents: Vec<String> = agents.into_iter().collect();
        agents.sort();
        agents.dedup();
        if agents.len() > MAX_ROW_AGENTS {
            agents.truncate(MAX_ROW_AGENTS);
            agents.push(TOO_MANY_AGENTS.to_string());
        }
        self.agents = agents;
        self
    }
}

/// The agents one audit row names at most.
pub const MAX_ROW_AGENTS: usize = 1000;
/// Stands for the agents past [`MAX_ROW_AGENTS`]: no agent has this id (ids never hold `*`).
const TOO_MANY_AGENTS: &str = "*more*";

#[derive(Clone, Debug, Default)]
pub struct AuditFilter {
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub principal: Option<String>,
    pub action_prefix: Option<String>,
    pub result: Option<String>,
    pub correlation_id: Option<String>,
    /// Only rows whose target is of this kind (a [`TargetType`] label).
    pub target_type: Option<String>,
    /// Only rows about this agent.
    pub agent_id: Option<String>,
    /// Confines the rows to what this reader may read: its own, and rows about its agents
    /// only ([`crate::groups::Reader`]); `None` reads every row (the server, the console).
    pub reader: Option<crate::groups::Reader>,
    pub limit: i64,
    /// Only rows older than this one (by the store's row id): where the next page starts.
    pub before_id: Option<i64>,
}

/// Where audit events go: the batching writer, or (on the console) straight to the store.
pub trait AuditSink: Send + Sync {
    fn record(&self, event: AuditEvent);
}

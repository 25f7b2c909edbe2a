//! What the store keeps of the fleet's work: executions and their responses, quarantine
//! states and compliance outcomes.

use async_trait::async_trait;
use serde_json::{Map, Value};
use toolgate_domain::StoreError;
use toolgate_domain::fleet::compliance::RuleResult;
use toolgate_domain::fleet::instruction::{ExecutionState, TargetStatus};
use toolgate_domain::fleet::wire::{QuarantineEnforcement, RunOrder, RunResult, RunStep};
use toolgate_domain::groups::Reach;

use crate::ColumnCondition;
use crate::by_definition::{DefinitionPage, DefinitionQuery, RowsOf};
use crate::rollouts::{RolloutState, RolloutStore};
use toolgate_domain::fleet::rollout::Rollout;

type Result<T> = std::result::Result<T, StoreError>;

/// A target's error when it was sent its run and answered nothing before the deadline.
pub const SILENT_PAST_DEADLINE: &str = "no result before the deadline: the agent took the run and has not answered since (for a reboot: the host did not come back in time, or its agent did not start)";

/// A target's error when the deadline came before its wave was released.
pub const UNRELEASED_AT_DEADLINE: &str =
    "skipped: the deadline passed before its wave was released (the waves before it had not all ended)";

/// An execution as created: its steps and every agent it targets.
#[derive(Clone, Debug)]
pub struct NewExecution {
    pub execution_id: String,
    /// `instruction` or `bundle`.
    pub kind: String,
    pub steps: Vec<RunStep>,
    pub scope: Option<String>,
    pub requested_by: String,
    pub created_at_ms: i64,
    pub deadline_ms: i64,
    pub targets: Vec<String>,
    /// The client's idempotency key and a digest of the arguments it came with: a second
    /// execution under the same key (same `requested_by`) is not created.
    pub idempotency: Option<Idempotency>,
    /// Sent in waves, or None: to every target at once.
    pub rollout: Option<Rollout>,
}

impl NewExecution {
    /// Each target's wave, in the order of `targets` (all 0 without a rollout).
    pub fn waves(&self) -> impl Iterator<Item = i64> + '_ {
        let n = self.targets.len();
        (0..n).map(move |i| self.rollout.map_or(0, |r| r.wave_of(i, n)))
    }

    /// The targets of the first wave: those sent as soon as the execution is stored.
    pub fn first_wave(&self) -> Vec<String> {
        self.targets.iter().zip(self.waves()).filter(|(_, wave)| *wave == 0).map(|(t, _)| t.clone()).collect()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Idempotency {
    pub key: String,
    pub arguments_digest: String,
}

/// What creating an execution did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Created {
    New,
    /// The key was used already, by this execution: with the same arguments (a retry), or
    /// with others (a mistake to refuse).
    Existing {
        execution_id: String,
        same_arguments: bool,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct ExecutionHeader {
    pub execution_id: String,
    pub kind: String,
    pub steps: Vec<RunStep>,
    pub scope: Option<String>,
    pub requested_by: String,
    pub created_at_ms: i64,
    pub deadline_ms: i64,
    pub cancelled_at_ms: Option<i64>,
    /// How many targets are in each status.
    pub counts: Vec<(TargetStatus, i64)>,
    /// Where its waves stand; None when it went to every target at once.
    pub rollout: Option<RolloutState>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TargetRecord {
    pub agent_id: String,
    pub status: TargetStatus,
    pub error: Option<String>,
    pub updated_at_ms: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StepRecord {
    pub agent_id: String,
    pub step: usize,
    pub status: String,
    pub error: Option<String>,
    pub row_count: i64,
}

/// Which responses to read: a keyset page in the order they arrived.
#[derive(Clone, Debug, Default)]
pub struct ResponseQuery {
    pub execution_id: String,
    /// Who reads (None: the server itself); the rows are there only for a reader the
    /// execution is readable by ([`Reader`]).
    pub reader: Option<Reader>,
    pub step: usize,
    pub agent_id: Option<String>,
    pub status: Option<TargetStatus>,
    pub conditions: Vec<ColumnCondition>,
    /// Only rows that arrived after this one ([`ResponseRow::arrival`]; 0 from the start).
    pub after: i64,
    pub limit: usize,
}

pub use toolgate_domain::groups::Reader;

/// One row an agent returned, with its place in the execution's arrival order.
#[derive(Clone, Debug, PartialEq)]
pub struct ResponseRow {
    pub agent_id: String,
    pub values: Map<String, Value>,
    /// Numbered from 1 in the order rows were stored; a later row always has a larger number
    /// (and a reader that sees a number sees every smaller one), so paging by it never skips
    /// or repeats a row while agents keep answering.
    pub arrival: i64,
}

/// A page of responses, and whether more matched after it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResponsePage {
    pub rows: Vec<ResponseRow>,
    pub more: bool,
    /// The rows that match after the query's `after`, this page's among them (counted in
    /// the same statement, before its limit).
    pub matched: usize,
}

/// One group of an aggregate: the column's value, how many rows, and the min, max, sum and
/// average of another column when one was asked for (sum and average of its numbers).
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub value: Value,
    pub count: i64,
    pub min: Value,
    pub max: Value,
    pub sum: Value,
    pub avg: Value,
}

/// What orders an aggregate's groups (the reference's `aggregate`): biggest first by count, or
/// by the sum, average or maximum of the measured column; smallest first by its minimum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GroupOrder {
    #[default]
    Count,
    Sum,
    Avg,
    Min,
    Max,
}

impl GroupOrder {
    /// The order tools.yaml's `aggregate` names.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "count" => Some(GroupOrder::Count),
            "sum" => Some(GroupOrder::Sum),
            "avg" => Some(GroupOrder::Avg),
            "min" => Some(GroupOrder::Min),
            "max" => Some(GroupOrder::Max),
            _ => None,
        }
    }

    /// The ORDER BY of a grouping that selects (value, count, min, max, sum, avg), ties by value.
    pub(crate) fn order_by(self) -> &'static str {
        match self {
            GroupOrder::Count => "2 DESC, 1",
            GroupOrder::Sum => "5 DESC NULLS LAST, 1",
            GroupOrder::Avg => "6 DESC NULLS LAST, 1",
            GroupOrder::Min => "3 ASC NULLS LAST, 1",
            GroupOrder::Max => "4 DESC NULLS LAST, 1",
        }
    }
}

/// A sum or an average as JSON, the same from either backend: a whole number as an integer.
pub(crate) fn number(value: Option<f64>) -> Value {
    match value {
        Some(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => Value::from(n as i64),
        Some(n) => Value::from(n),
        None => Value::Null,
    }
}

/// How a result was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    Stored,
    /// The target had already finished (a repeated upload): nothing changed.
    AlreadyFinal,
    /// The target was never sent the run, or has ended without a result (cancelled, offline
    /// or timed out past the deadline, refused): nothing changed.
    NotOpen,
    /// No such execution or target.
    Unknown,
}

/// Cancelling: how many targets were stopped before delivery, and every target's status after.
#[derive(Clone, Debug, PartialEq)]
pub struct Cancelled {
    pub stopped: i64,
    pub targets: Vec<TargetRecord>,
}

/// One agent's quarantine: what the server wants, and what the agent last reported.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct QuarantineRecord {
    pub agent_id: String,
    pub wanted: bool,
    pub reason: Option<String>,
    pub reported: Option<bool>,
    /// How the agent last said it holds a quarantine (None: it never said).
    pub enforcement: Option<QuarantineEnforcement>,
}

/// The stored form of an agent's quarantine enforcement (JSON); an unreadable one reads as none.
pub(crate) fn enforcement_from(text: Option<String>) -> Option<QuarantineEnforcement> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

pub(crate) fn enforcement_text(enforcement: Option<&QuarantineEnforcement>) -> Option<String> {
    enforcement.and_then(|e| serde_json::to_string(e).ok())
}

#[async_trait]
pub trait WorkStore: RolloutStore + Send + Sync {
    /// Creates the execution and its targets in one transaction, unless its idempotency key
    /// was used already by the same principal (then nothing is created).
    async fn create_execution(&self, execution: NewExecution) -> Result<Created>;
    /// An execution's run (if it is neither cancelled nor past `now_ms`) and its targets not
    /// yet sent it: what a replica sends its connected agents when another created it.
    async fn undelivered(&self, execution_id: &str, now_ms: i64) -> Result<Option<(RunOrder, Vec<String>)>>;
    /// The unfinished, uncancelled runs for one agent whose deadline is still ahead.
    async fn due_for(&self, agent_id: &str, now_ms: i64) -> Result<Vec<RunOrder>>;
    /// The run was sent to these agents: pending becomes running.
    async fn mark_delivered(&self, execution_id: &str, agent_ids: Vec<String>, now_ms: i64) -> Result<()>;
    /// The server will not send the run to these agents (a change, and they are quarantined):
    /// their unfinished targets become `refused`, with `reason` as the error.
    async fn refuse(&self, execution_id: &str, agent_ids: Vec<String>, reason: &str, now_ms: i64) -> Result<()>;
    /// Stores an agent's result (steps and rows) and finishes its target, in one transaction;
    /// only for a target the run was sent to and that is still open (`running`).
    async fn save_result(&self, agent_id: &str, result: RunResult, now_ms: i64) -> Result<Taken>;
    /// Targets past their deadline: pending -> offline (`skipped` when their wave was never
    /// released), running -> timed_out. How many changed.
    async fn expire(&self, now_ms: i64) -> Result<u64>;
    /// Stops the targets not yet delivered; None when there is no such execution.
    async fn cancel(&self, execution_id: &str, now_ms: i64) -> Result<Option<Cancelled>>;
    /// `reader`: who asks (None: the server itself); an execution it may not read is None.
    async fn execution(&self, execution_id: &str, reader: Option<&Reader>) -> Result<Option<ExecutionHeader>>;
    async fn targets(&self, execution_id: &str) -> Result<Vec<TargetRecord>>;
    /// One page of the targets (in agent order), those in `status` only when given.
    async fn targets_page(
        &self,
        execution_id: &str,
        status: Option<TargetStatus>,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<TargetRecord>>;
    /// Newest first; `definition` keeps executions with a step of that definition, `state`
    /// those running or finished; those `reader` may read only (pages are cut after that).
    async fn executions(
        &self,
        definition: Option<&str>,
        state: Option<ExecutionState>,
        reader: Option<&Reader>,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<ExecutionHeader>>;
    /// How many executions [`WorkStore::executions`] finds on every page.
    async fn count_executions(
        &self,
        definition: Option<&str>,
        state: Option<ExecutionState>,
        reader: Option<&Reader>,
    ) -> Result<usize>;
    async fn steps(&self, execution_id: &str) -> Result<Vec<StepRecord>>;
    /// A page of rows in arrival order (each with its agent id) and whether more matched.
    async fn responses(&self, query: ResponseQuery) -> Result<ResponsePage>;
    /// Rows of every step that ran a definition, across executions ([`DefinitionQuery`]).
    async fn definition_responses(&self, query: DefinitionQuery) -> Result<DefinitionPage>;
    /// Rows of one step, or of every step that ran a definition, grouped by a column, biggest
    /// groups first (only of the executions `reader` may read).
    async fn aggregate(
        &self,
        rows: RowsOf<'_>,
        reader: Option<&Reader>,
        group_by: &str,
        of: Option<&str>,
        order: GroupOrder,
        limit: usize,
    ) -> Result<Vec<Group>>;

    async fn set_quarantine(&self, agent_id: &str, wanted: bool, reason: Option<&str>) -> Result<()>;
    /// What the agent says of its quarantine: the state it is in, and how it holds one (kept
    /// as it was when an older agent says nothing of it).
    async fn quarantine_reported(
        &self,
        agent_id: &str,
        quarantined: bool,
        enforcement: Option<&QuarantineEnforcement>,
    ) -> Result<()>;
    /// How the agent last said it holds a quarantine (inner None: it never said); None when
    /// there is no such agent within `reach`.
    async fn quarantine_enforcement(
        &self,
        agent_id: &str,
        reach: &Reach,
    ) -> Result<Option<Option<QuarantineEnforcement>>>;
    async fn quarantines(&self) -> Result<Vec<QuarantineRecord>>;

    /// Replaces one agent's compliance outcomes.
    async fn save_compliance(&self, agent_id: &str, results: Vec<RuleResult>, evaluated_at_ms: i64) -> Result<()>;
    /// (agent id, outcome, when) for one rule or all.
    /// (Confined to the agents `reach` covers, in the query.)
    async fn compliance(&self, rule_id: Option<&str>, reach: &Reach) -> Result<Vec<(String, RuleResult, i64)>>;
}

/// SQL that holds when `param` (text: `running`, `finished` or NULL) is NULL or is the state
/// of the row `execution`: running while a target is in a state `TargetStatus::is_final`
/// denies, finished otherwise. Each backend binds `param`.
pub(crate) fn state_condition(param: &str) -> String {
    let unfinished: Vec<String> =
        TargetStatus::ALL.iter().filter(|s| !s.is_final()).map(|s| format!("'{}'", s.as_str())).collect();
    format!(
        "{param} IS NULL OR EXISTS (SELECT 1 FROM execution_target u WHERE u.execution_id = execution.execution_id \
         AND u.status IN ({})) = ({param} = 'running')",
        unfinished.join(", ")
    )
}

//! Prometheus metrics (`/metrics`): counters recorded where things happen, gauges read from the
//! live structures and the store when scraped (so they can never drift from the truth).
//! Every series is listed, with what to alert on, in docs/metrics.md; the names live here.
//!
//! Recording goes through the `metrics` facade: until `serve` installs the exporter (once per
//! process), every call below is a no-op, so the CLI and in-process tests pay nothing.

use std::sync::OnceLock;

use metrics::{Counter, counter, gauge};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use toolgate_domain::audit::AuditOutcome;

use crate::registry::ToolId;

pub const REQUESTS: &str = "toolgate_mcp_requests_total";
pub const DENIALS: &str = "toolgate_mcp_denials_total";
pub const TOOL_CALLS: &str = "toolgate_mcp_tool_calls_total";
pub const APPROVALS: &str = "toolgate_approvals_total";
pub const APPROVALS_BURNED: &str = "toolgate_approvals_burned_total";
pub const APPROVALS_PENDING: &str = "toolgate_approvals_pending";
pub const AUTH_FAILURES: &str = "toolgate_auth_failures_total";
pub const TOKENS_REFUSED: &str = "toolgate_access_tokens_refused_total";
pub const IDP_SIGN_INS_REFUSED: &str = "toolgate_console_idp_refusals_total";
pub const SESSIONS_ACTIVE: &str = "toolgate_mcp_sessions_active";
pub const STREAMS_ACTIVE: &str = "toolgate_mcp_streams_active";
pub const AGENTS_CONNECTED: &str = "toolgate_agents_connected";
pub const AGENTS_ENROLLED: &str = "toolgate_agents_enrolled";
pub const EXECUTIONS_IN_FLIGHT: &str = "toolgate_executions_in_flight";
pub const AUDIT_QUEUE_DEPTH: &str = "toolgate_audit_queue_depth";
pub const POLLS: &str = "toolgate_mcp_poll_total";
pub const CONSOLE_SIGN_INS: &str = "toolgate_console_sign_ins_total";
pub const CONSOLE_STEP_UPS: &str = "toolgate_console_step_ups_total";
pub const SESSIONS_OPENED: &str = "toolgate_mcp_sessions_opened_total";
pub const STREAMS_REFUSED: &str = "toolgate_mcp_streams_refused_total";
pub const STREAMS_CLOSED: &str = "toolgate_mcp_streams_closed_total";
pub const REPLAY_EVICTIONS: &str = "toolgate_mcp_replay_evictions_total";
pub const CANCELLATIONS: &str = "toolgate_mcp_cancellations_total";
pub const RECALLS_REFUSED: &str = "toolgate_approval_recalls_refused_total";
/// The seeds' quota-exhaustion counter: engine principals' requests refused, by side and limit.
pub const QUOTA_EXHAUSTED: &str = "toolgate_principal_quota_exhausted_total";
pub const QUOTA_LIMITS: [&str; 2] = ["rate", "concurrency"];

/// Why a stream was refused: the caps `admission` names.
pub const STREAM_REFUSAL_REASONS: [&str; 4] =
    ["post_per_principal_cap", "get_per_principal_cap", "post_global_cap", "get_global_cap"];
/// Why a stream ended: its result went out (`completed`), its client left first
/// (`client_gone`), or the server ended it (the `stream_closed` reasons).
pub const STREAM_CLOSE_REASONS: [&str; 7] = [
    "completed",
    "client_gone",
    "credential_revoked",
    "auth_unavailable",
    "session_terminated",
    "superseded",
    "record_gone",
];
/// What a `notifications/cancelled` found: a call in flight, or none by that id; and the
/// calls cancelled because their session ended.
pub const CANCELLATION_OUTCOMES: [&str; 3] = ["cancelled", "unknown", "session_ended"];
pub const STORE_SECONDS: &str = toolgate_store::STORE_SECONDS;

/// Store latency buckets, seconds: a cached read is tens of microseconds, an fsync about a
/// millisecond, a stalled disk seconds.
const STORE_BUCKETS: [f64; 12] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the exporter as this process's recorder (the first call does; later ones return
/// the same handle). None if another recorder was installed first.
pub fn install() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full(STORE_SECONDS.into()), &STORE_BUCKETS)
                .ok()?
                .build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok()?;
            describe();
            Some(handle)
        })
        .clone()
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(REQUESTS, "MCP requests answered, by method and outcome (ok, error, stream, accepted)");
    describe_counter!(DENIALS, "Refusals of the gate and the protocol, by JSON-RPC code");
    describe_counter!(
        TOOL_CALLS,
        "tools/call answered, by tool and audited outcome (success, denied, failure, pending)"
    );
    describe_counter!(APPROVALS, "Approval tickets by tool and event: minted, approved, rejected, consumed");
    describe_counter!(
        APPROVALS_BURNED,
        "Consumed approval tickets whose call then did not succeed, by tool and reason"
    );
    describe_gauge!(APPROVALS_PENDING, "Approval tickets waiting for a person");
    describe_counter!(AUTH_FAILURES, "Requests refused for a missing, unknown, revoked or expired token");
    describe_counter!(
        IDP_SIGN_INS_REFUSED,
        "Console sign-ins and step-ups through the identity provider refused, by reason"
    );
    describe_counter!(
        TOKENS_REFUSED,
        "Access tokens from an identity provider refused, by reason (signature, audience, expired, ...)"
    );
    describe_gauge!(SESSIONS_ACTIVE, "Live handshake-era MCP sessions");
    describe_gauge!(STREAMS_ACTIVE, "Streams held open, by kind (call: streamed answers, channel: GET channels)");
    describe_gauge!(AGENTS_CONNECTED, "Agents connected to this server now");
    describe_gauge!(AGENTS_ENROLLED, "Agents enrolled (revoked ones excluded)");
    describe_gauge!(EXECUTIONS_IN_FLIGHT, "Executions with an agent yet to answer");
    describe_gauge!(AUDIT_QUEUE_DEPTH, "Audit rows queued and not yet stored");
    describe_counter!(POLLS, "Result polls by tool and verdict (ready, not_ready)");
    describe_counter!(CONSOLE_SIGN_INS, "Console sign-in attempts by result (success, denied, locked)");
    describe_counter!(CONSOLE_STEP_UPS, "Console step-up codes by result (success, denied, locked)");
    describe_counter!(
        toolgate_fleet::VIEWS_MADE,
        "Recent views of devices' experience made from the store, by what made them (read, report, hour)"
    );
    describe_counter!(SESSIONS_OPENED, "Handshake-era MCP sessions opened");
    describe_counter!(STREAMS_REFUSED, "Streams refused by the cap that refused them");
    describe_counter!(STREAMS_CLOSED, "Streams ended, by why");
    describe_counter!(REPLAY_EVICTIONS, "Frames evicted from sessions' replay rings before a client read them");
    describe_counter!(CANCELLATIONS, "Cancellations of calls in flight, by outcome");
    describe_counter!(RECALLS_REFUSED, "Recalls with an approval_id that could not be redeemed, by tool and reason");
    describe_counter!(
        QUOTA_EXHAUSTED,
        "Engine principals' requests refused past their quota on this server, by side and limit"
    );
    describe_histogram!(
        STORE_SECONDS,
        metrics::Unit::Seconds,
        "Store operations, from the request's wait to the answer"
    );
    // Series worth alerting on exist from the start, at zero: an absent series cannot fire.
    for tool in ToolId::ALL.iter().map(|t| t.meta()).filter(|m| m.approval_gated) {
        for event in ApprovalEvent::ALL {
            counter!(APPROVALS, "tool" => tool.name, "event" => event.label()).absolute(0);
        }
        for reason in BurnReason::ALL {
            counter!(APPROVALS_BURNED, "tool" => tool.name, "reason" => reason.label()).absolute(0);
        }
    }
    counter!(AUTH_FAILURES).absolute(0);
    for result in ["success", "denied", "locked"] {
        counter!(CONSOLE_SIGN_INS, "result" => result).absolute(0);
        counter!(CONSOLE_STEP_UPS, "result" => result).absolute(0);
    }
    counter!(SESSIONS_OPENED).absolute(0);
    counter!(REPLAY_EVICTIONS).absolute(0);
    for reason in STREAM_REFUSAL_REASONS {
        counter!(STREAMS_REFUSED, "reason" => reason).absolute(0);
    }
    for reason in STREAM_CLOSE_REASONS {
        counter!(STREAMS_CLOSED, "reason" => reason).absolute(0);
    }
    for outcome in CANCELLATION_OUTCOMES {
        counter!(CANCELLATIONS, "outcome" => outcome).absolute(0);
    }
    for limit in QUOTA_LIMITS {
        counter!(QUOTA_EXHAUSTED, "side" => "mcp", "limit" => limit).absolute(0);
    }
}

/// What the gauges say at a scrape, read by whoever serves `/metrics` (this module reads no
/// server state of its own: it is below the MCP server, never beside it).
#[derive(Clone, Copy, Debug, Default)]
pub struct Gauges {
    pub sessions: usize,
    pub call_streams: usize,
    pub channels: usize,
    pub agents_connected: usize,
    pub agents_enrolled: usize,
    pub audit_queue: usize,
    /// None: the store could not answer (the gauges keep their last value; readyz says why).
    pub store: Option<toolgate_store::StoreGauges>,
}

/// The text a scrape gets: the gauges as read now, then every series.
pub fn render(now: Gauges) -> Option<String> {
    let handle = HANDLE.get()?.as_ref()?;
    gauge!(SESSIONS_ACTIVE).set(now.sessions as f64);
    gauge!(STREAMS_ACTIVE, "kind" => "call").set(now.call_streams as f64);
    gauge!(STREAMS_ACTIVE, "kind" => "channel").set(now.channels as f64);
    gauge!(AGENTS_CONNECTED).set(now.agents_connected as f64);
    gauge!(AGENTS_ENROLLED).set(now.agents_enrolled as f64);
    gauge!(AUDIT_QUEUE_DEPTH).set(now.audit_queue as f64);
    if let Some(store) = now.store {
        gauge!(APPROVALS_PENDING).set(store.approvals_pending as f64);
        gauge!(EXECUTIONS_IN_FLIGHT).set(store.executions_in_flight as f64);
    }
    handle.run_upkeep();
    Some(handle.render())
}

/// Counter handles, made on first use and kept: the `counter!` macro builds a labelled key
/// and looks it up in the registry on every call (an allocation and a hash), which the hot
/// path measured at about 4% of a read call's cost.
struct Cached<const N: usize>([OnceLock<Counter>; N]);

impl<const N: usize> Cached<N> {
    const fn new() -> Self {
        Self([const { OnceLock::new() }; N])
    }

    fn get(&self, i: usize, make: impl FnOnce() -> Counter) -> &Counter {
        self.0[i].get_or_init(make)
    }
}

const OUTCOMES: usize = Outcome::ALL.len();
static REQUEST_COUNTERS: [Cached<OUTCOMES>; MAX_METHOD_LABELS] = [const { Cached::new() }; MAX_METHOD_LABELS];

/// How a request was answered (the `outcome` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A result.
    Ok,
    /// A JSON-RPC error.
    Error,
    /// An SSE answer, whose outcome travels inside it.
    Stream,
    /// A notification or a response, taken.
    Accepted,
}

impl Outcome {
    pub const ALL: [Outcome; 4] = [Outcome::Ok, Outcome::Error, Outcome::Stream, Outcome::Accepted];

    pub fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Stream => "stream",
            Outcome::Accepted => "accepted",
        }
    }
}

/// The most `method` labels a request can be counted under (the MCP router's methods and
/// the kinds of message that are not a request for one; the router checks it fits).
pub const MAX_METHOD_LABELS: usize = 32;

/// One MCP request answered, under `label` (the router's label at position `slot`, which
/// picks the cached counter).
pub fn request(slot: usize, label: &'static str, outcome: Outcome) {
    let Some(cached) = REQUEST_COUNTERS.get(slot) else { return };
    cached.get(outcome as usize, || counter!(REQUESTS, "method" => label, "outcome" => outcome.label())).increment(1);
}

/// The most `code` labels a refusal of the gate can be counted under (the MCP codes module
/// names them and checks they fit).
pub const MAX_DENIAL_LABELS: usize = 8;

/// One refusal of the gate, under `label` (the caller's label at position `slot`, which picks
/// the cached counter: an invalid call is on the hot path).
pub fn denial(slot: usize, label: &'static str) {
    static CACHED: Cached<MAX_DENIAL_LABELS> = Cached::new();
    CACHED.get(slot, || counter!(DENIALS, "code" => label)).increment(1);
}

const AUDIT_OUTCOMES: usize = 5;
const _: () = assert!(AuditOutcome::Approved as usize == AUDIT_OUTCOMES - 1, "one column per AuditOutcome");
static TOOL_CALL_COUNTERS: OnceLock<Vec<Cached<AUDIT_OUTCOMES>>> = OnceLock::new();

/// One tools/call answered: the tool (None: a name the catalogue does not have, counted as
/// `unknown` so the label set stays bounded) and the outcome its audit row records.
pub fn tool_call(tool: Option<ToolId>, outcome: AuditOutcome) {
    let counters = TOOL_CALL_COUNTERS.get_or_init(|| (0..=ToolId::ALL.len()).map(|_| Cached::new()).collect());
    let (slot, name) = match tool {
        Some(tool) => (tool.index(), tool.meta().name),
        None => (ToolId::ALL.len(), "unknown"),
    };
    let column = outcome as usize;
    counters[slot].get(column, || counter!(TOOL_CALLS, "tool" => name, "outcome" => outcome.label())).increment(1);
}

/// What happened to an approval ticket.
#[derive(Clone, Copy, Debug)]
pub enum ApprovalEvent {
    Minted,
    Approved,
    Rejected,
    /// Recalled: the call it approved ran (a burn is counted apart, with its reason).
    Consumed,
}

impl ApprovalEvent {
    const ALL: [ApprovalEvent; 4] = [Self::Minted, Self::Approved, Self::Rejected, Self::Consumed];

    fn label(self) -> &'static str {
        match self {
            ApprovalEvent::Minted => "minted",
            ApprovalEvent::Approved => "approved",
            ApprovalEvent::Rejected => "rejected",
            ApprovalEvent::Consumed => "consumed",
        }
    }
}

/// Why a consumed ticket was spent for nothing.
#[derive(Clone, Copy, Debug)]
pub enum BurnReason {
    /// The handler refused the call (a business rule, or the client's user said no).
    Refused,
    /// The handler failed (a store fault, an error result, an answer over its cap).
    Failed,
}

impl BurnReason {
    const ALL: [BurnReason; 2] = [Self::Refused, Self::Failed];

    fn label(self) -> &'static str {
        match self {
            BurnReason::Refused => "refused",
            BurnReason::Failed => "failed",
        }
    }
}

/// An approval ticket's event, for the tool it approves (a name the catalogue does not have,
/// from an old ticket, is counted as `unknown` so the label set stays bounded).
pub fn approval(event: ApprovalEvent, tool: &str) {
    counter!(APPROVALS, "tool" => known_tool(tool), "event" => event.label()).increment(1);
}

/// A consumed ticket whose call did not succeed: a person's approval wasted.
pub fn approval_burned(tool: &'static str, reason: BurnReason) {
    counter!(APPROVALS_BURNED, "tool" => tool, "reason" => reason.label()).increment(1);
}

fn known_tool(name: &str) -> &'static str {
    ToolId::from_name(name).map_or("unknown", |t| t.meta().name)
}

pub fn auth_failure() {
    counter!(AUTH_FAILURES).increment(1);
}

/// A console sign-in or step-up through the identity provider refused, by why.
pub fn idp_sign_in_refused(reason: &'static str) {
    counter!(IDP_SIGN_INS_REFUSED, "reason" => reason).increment(1);
}

/// An identity provider's access token refused, by why (`crate::oauth::resource::Refusal::label`).
pub fn token_refused(reason: &'static str) {
    counter!(TOKENS_REFUSED, "reason" => reason).increment(1);
}

/// A result poll's verdict (get_execution_status, get_bundle_result).
pub fn poll(tool: &'static str, ready: bool) {
    counter!(POLLS, "tool" => tool, "result" => if ready { "ready" } else { "not_ready" }).increment(1);
}

/// A console sign-in attempt: `success`, `denied` (a wrong name, password or code, or a
/// replayed code) or `locked` (refused unchecked while locked).
pub fn console_sign_in(result: &'static str) {
    counter!(CONSOLE_SIGN_INS, "result" => result).increment(1);
}

/// An engine principal's request refused past one of [`QUOTA_LIMITS`].
pub fn quota_exhausted(limit: &'static str) {
    counter!(QUOTA_EXHAUSTED, "side" => "mcp", "limit" => limit).increment(1);
}

pub fn session_opened() {
    counter!(SESSIONS_OPENED).increment(1);
}

/// One of [`STREAM_REFUSAL_REASONS`].
pub fn stream_refused(reason: &'static str) {
    counter!(STREAMS_REFUSED, "reason" => reason).increment(1);
}

/// One of [`STREAM_CLOSE_REASONS`].
pub fn stream_closed(reason: &'static str) {
    counter!(STREAMS_CLOSED, "reason" => reason).increment(1);
}

pub fn replay_evicted(frames: u64) {
    counter!(REPLAY_EVICTIONS).increment(frames);
}

/// A recall refused: the ticket unknown, for other arguments, used, rejected or expired.
pub fn recall_refused(tool: &'static str, reason: &'static str) {
    counter!(RECALLS_REFUSED, "tool" => tool, "reason" => reason).increment(1);
}

/// One of [`CANCELLATION_OUTCOMES`], `count` times.
pub fn cancellations(outcome: &'static str, count: u64) {
    counter!(CANCELLATIONS, "outcome" => outcome).increment(count);
}

/// A step-up code (deciding an approval, minting a credential): `success`, `denied` (wrong,
/// replayed, or no factor) or `locked` (refused unchecked while locked).
pub fn console_step_up(result: &'static str) {
    counter!(CONSOLE_STEP_UPS, "result" => result).increment(1);
}

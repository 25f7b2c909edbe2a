//! MCP over both protocol eras, without the HTTP around it: JSON-RPC framing, the era of each
//! request, the method router, tools/call through the gate, and the mapping of every denial
//! to its JSON-RPC code. The `http` module hands it authenticated requests.

mod admission;
mod asking;
mod back_channel;
mod changing;
mod channel;
mod chosen;
mod codes;
mod completion;
mod dispatch;
mod era;
mod follow;
mod handshake;
mod headers;
mod in_flight;
mod incoming;
mod input_required;
pub mod jsonrpc;
mod listen;
mod lists;
mod prompts;
mod replay;
mod replicas;
mod reply;
mod request;
mod resources;
mod router;
pub mod sessions;
mod stateless;
mod stream_audit;
mod tasks;
mod tools_call;

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_domain::Denial;
use toolgate_domain::audit::{AuditEvent, AuditSink};
use toolgate_domain::catalogue::ToolMeta;
use toolgate_gate::{Gate, SchemaError};
use toolgate_policy::TierRules;

pub use admission::StreamLimits;
pub use chosen::TOOLSETS_HEADER;
pub use codes::denial_code;
pub use headers::{SESSION_ID, header_value};
pub use lists::ListResults;
pub use reply::{AnswerLimits, Payload, Reply};
pub use router::answer_post;

use crate::services::Services;

/// The handshake-era revisions, oldest first; the last is answered when a client asks for
/// one we do not speak.
pub const HANDSHAKE_VERSIONS: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];
/// The stateless revisions. Also the `supported` list of every -32022.
pub const STATELESS_VERSIONS: [&str; 1] = ["2026-07-28"];
/// A handshake request without `MCP-Protocol-Version` is this revision.
pub const DEFAULT_VERSION: &str = "2025-03-26";
/// From this revision on, invalid arguments are a tool result with `isError`, not -32602.
pub const IS_ERROR_FOR_ARGUMENTS_FROM: &str = "2025-11-25";
/// How long a client may cache tools/list and discover results (ms).
pub const LIST_TTL_MS: u64 = 300_000;

pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// 2026-07-28: the level of log lines the client wants during this request.
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
const INSTRUCTIONS: &str = "toolgate serves a reviewed, policy-checked tool catalogue. Each tool's annotations are enforced: \
     a refused call says which tier or permission is needed. discover_permissions lists what this token may do.";

/// How the operator started the server.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Serve the whole catalogue to every tier (the gate still refuses at call time).
    pub list_all_tools: bool,
    /// Refuse (and hide) every tool that is not read-class, for every tier.
    pub read_only: bool,
    pub sessions: sessions::SessionLimits,
    pub streams: admission::StreamLimits,
    pub answers: reply::AnswerLimits,
}

/// Everything MCP requests need, shared by every connection.
pub struct McpServer {
    services: Arc<Services>,
    gate: Gate,
    sessions: sessions::Sessions,
    /// Handshake-era calls being answered, for `notifications/cancelled`.
    in_flight: Arc<in_flight::InFlight>,
    /// Streamed answers held open now (admission caps).
    streams: Arc<admission::Admission>,
    /// Fired when the server begins to stop: every call's cancellation descends from it, so a
    /// streamed execution ends its answer (the execution goes on) instead of holding the exit.
    shutdown: toolgate_domain::CancellationToken,
    /// Handshake-era questions sent to clients and not yet answered.
    outstanding: Arc<back_channel::Outstanding>,
    /// 2026-07-28: signs and checks the `requestState` of `input_required` rounds.
    request_states: input_required::RequestStates,
    /// Sessions and request-state marks shared with other replicas (None: alone).
    shared: Option<replicas::SharedState>,
    /// 2026-07-28 tasks (the tasks extension), by id.
    tasks: Arc<tasks::Tasks>,
    lists: Vec<ListResults>,
    /// What lists of chosen toolsets are made from (and those made).
    chosen_lists: chosen::ChosenLists,
    /// Each tier's default list (its toolsets of policy.yaml), made at start: what most
    /// clients ask for, served without the choices' cache.
    default_lists: Vec<ListResults>,
    list_frame: lists::ListFrame,
    /// Prompts, resources and templates, read from the catalogue once.
    prompts_resources: crate::prompts_resources::PromptsResources,
    server_info: Value,
    options: Options,
    correlations: crate::correlation::Correlations,
}

impl McpServer {
    pub fn new(services: Arc<Services>, options: Options) -> Result<Self, SchemaError> {
        let clock = services.clock().clone();
        let catalogue = services.catalogue();
        let repositories = services.repositories();
        let deciders = toolgate_gate::Deciders {
            catalogue,
            credentials: repositories.credentials.clone(),
            groups: repositories.groups.clone(),
            work: repositories.work.clone(),
        };
        let gate = Gate::new(catalogue, repositories.approvals.clone(), clock, options.read_only)?
            .with_argument_check(Arc::new(crate::argument_checks::ServerChecks))
            .with_deciders(deciders);
        let server_info = json!({"name": "toolgate", "title": "toolgate", "version": env!("CARGO_PKG_VERSION")});
        let list_frame = lists::ListFrame::new(&server_info);
        let (lists, chosen_lists) = lists::precompute(&gate, &list_frame, options);
        let default_lists = lists::tier_defaults(catalogue, &chosen_lists, &list_frame);
        let correlations = crate::correlation::Correlations::new(services.clock().clone());
        Ok(Self {
            services,
            gate,
            sessions: sessions::Sessions::new(options.sessions),
            in_flight: Arc::default(),
            streams: Arc::new(admission::Admission::new(options.streams)),
            shutdown: toolgate_domain::CancellationToken::new(),
            outstanding: Arc::default(),
            // A key of this run's own unless the operator's is set (`with_request_state_key`).
            request_states: input_required::RequestStates::new(toolgate_domain::secrets::random_bytes::<32>().to_vec()),
            shared: None,
            tasks: Arc::default(),
            lists,
            chosen_lists,
            default_lists,
            list_frame,
            prompts_resources: crate::prompts_resources::PromptsResources::load(catalogue),
            server_info,
            options,
            correlations,
        })
    }

    /// The HMAC key of 2026-07-28 request states: kept in the data dir, so a state issued
    /// before a restart is still good after it.
    pub fn with_request_state_key(mut self, key: Vec<u8>) -> Self {
        self.request_states = input_required::RequestStates::new(key);
        self
    }

    pub fn services(&self) -> &Services {
        &self.services
    }

    /// The services as handlers hold them (a REST twin runs a tool's handler).
    pub fn services_handle(&self) -> Arc<Services> {
        self.services.clone()
    }

    /// A tool's arguments against its published inputSchema, as a tools/call checks them.
    pub fn check_arguments(&self, tool: &'static ToolMeta, arguments: &Value) -> Result<(), Denial> {
        self.gate.schemas().check(tool, arguments)
    }

    /// Live sessions, streamed answers and GET channels, now (for /metrics).
    pub fn live_counts(&self) -> (usize, usize, usize) {
        let (calls, channels) = self.streams.active();
        (self.sessions.count(), calls, channels)
    }

    /// The server is stopping: calls still following their work answer with what they have.
    pub fn begin_shutdown(&self) {
        self.shutdown.cancel();
        self.sessions.close_channels();
    }

    /// A cancellation token for one call: fired by its client, or by the server stopping.
    fn call_cancellation(&self) -> toolgate_domain::CancellationToken {
        self.shutdown.child_token()
    }

    /// The current HTTP exchange's correlation id (the one its `X-Correlation-Id` header
    /// shows), or a new one outside of any: `req-<hex ms>-<hex seq>`, unique per server run,
    /// shown to clients and written to audit.
    pub fn correlation_id(&self) -> String {
        self.correlations.current_or_fresh()
    }

    /// A fresh id for a new exchange (`crate::correlation`).
    pub fn new_correlation_id(&self) -> String {
        self.correlations.fresh()
    }

    fn list_for(&self, tier: Option<&TierRules>) -> &ListResults {
        &self.lists[tier.map_or(self.lists.len() - 1, |t| t.index)]
    }

    fn now_ms(&self) -> i64 {
        self.services.clock().now_ms()
    }

    fn record(&self, event: AuditEvent) {
        self.services.audit().record(event);
    }

    /// Writes the row and waits until it is committed (state-changing calls).
    async fn record_durable(&self, event: AuditEvent) {
        if !self.services.audit().record_durable(event).await {
            tracing::error!("a state-changing call's audit row could not be made durable (it was logged)");
        }
    }
}

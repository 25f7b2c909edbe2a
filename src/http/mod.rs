//! `toolgate serve`: the HTTP edge (axum). Routes, Host/Origin checks, authentication, body
//! limits and the admin API live here; MCP itself is the `mcp` module's.

mod admission;
mod agent_endpoint;
mod agent_frames;
mod agent_uploads;
pub mod agent_work;
mod api;
mod auth;
mod auth_failures;
mod console;
mod cors;
mod edge;
mod error;
mod listener;
mod local_agent;
mod mcp_endpoint;
mod metrics_endpoint;
mod oauth_callers;
mod oauth_endpoints;
mod quotas;
mod serve;
pub(crate) mod tls;
mod tokens_api;
mod upkeep;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::middleware::from_fn_with_state;
use axum::response::Response;
use axum::routing::{any, get};
use serde_json::json;

pub use console::factor as console_factor;
pub use console::session::ConsoleSession;
pub use error::{ApiError, json_response};
pub use listener::ConnectionLimits;
pub use serve::{bootstrap, serve};
pub use tls::TlsFiles;

use crate::mcp::McpServer;

pub const MAX_BODY_BYTES: u64 = 4 * 1024 * 1024;

#[derive(Clone, Debug)]
pub struct Config {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    /// The store: SQLite in the data dir, or a PostgreSQL database shared by replicas.
    pub database: crate::database::Database,
    /// This server's name in a shared database's rows.
    pub replica: String,
    /// Origins allowed besides the loopback ones.
    pub allowed_origins: Vec<String>,
    /// Serve the whole catalogue to every tier (the gate still refuses at call time).
    pub list_all_tools: bool,
    /// Refuse every tool that is not read-class, for every tier.
    pub read_only: bool,
    /// Answer every MCP request with -32005.
    pub mcp_disable: bool,
    pub sessions: crate::mcp::sessions::SessionLimits,
    /// Streamed answers held open at once (`--max-streams`, `--max-streams-per-principal`).
    pub streams: crate::mcp::StreamLimits,
    /// How large one tools/call answer and one batch's answers may grow.
    pub answers: crate::mcp::AnswerLimits,
    /// Failed authentications from one address within this window are audited as one row
    /// and a count.
    pub auth_failure_window_ms: i64,
    /// Audit rows older than this are deleted.
    pub audit_retention_ms: i64,
    pub connections: ConnectionLimits,
    /// How long an authenticated token is trusted without asking the store again.
    pub auth_cache_ttl_ms: i64,
    pub fleet: toolgate_fleet::FleetSettings,
    /// The niceness of the agents' threads (`--agent-nice`, http/agent_work.rs).
    pub agent_nice: i32,
    /// Also run an agent on this machine, enrolled on first start (`--local-agent`).
    pub local_agent: bool,
    /// Where the compliance rules come from (`--compliance`).
    pub compliance: crate::compliance::RuleSource,
    /// Where the key-encryption keys come from (`--kek-file`, `TOOLGATE_KEK`).
    pub kek: crate::sealing::vault::KeySource,
    /// The deployment settings (`--config`), if any.
    pub deployment: Option<crate::deployment::Settings>,
    /// Upload grants' limits and retention classes (the settings', or the defaults).
    pub uploads: toolgate_catalogue::deployment::UploadLimits,
    /// How long agents' client certificates are valid (`--agent-cert-lifetime`).
    pub agent_cert_lifetime_secs: i64,
    /// A listener of the agent surface's own (`--agent-listen`); None: agents use `listen`.
    pub agent_listen: Option<SocketAddr>,
    /// A listener of its own for /metrics, without authentication (`--metrics-listen`).
    pub metrics_listen: Option<SocketAddr>,
    /// HTTPS on every listener (`--tls-cert`, `--tls-key`); None: plain HTTP.
    pub tls: Option<TlsFiles>,
    /// The agent listener's own pair (`--agent-tls-cert`, `--agent-tls-key`); None: `tls`'s.
    pub agent_tls: Option<TlsFiles>,
    /// A console session unused this long is signed out (`--console-idle-timeout`).
    pub console_idle_ms: i64,
    /// How old a console proof may be for a decision (`--console-step-up-window`).
    pub console_step_up_ms: i64,
}

/// What every request handler shares.
pub struct AppState {
    pub config: Config,
    /// What every surface reads and writes through (the MCP server holds the same handle).
    pub services: Arc<crate::services::Services>,
    pub mcp: Arc<McpServer>,
    pub auth_failures: Arc<auth_failures::AuthFailures>,
    /// Signed-in people of the approver's console.
    pub console: console::ConsoleSessions,
    /// Engine principals' request rates and requests in flight on this server.
    pub quotas: quotas::Quotas,
    /// Access tokens from the organisation's identity provider (the deployment's `oauth`).
    pub oauth: Option<crate::oauth::resource::ResourceServer>,
    /// People's tokens already checked, until the cache's lifetime or the token's end.
    pub oauth_callers: oauth_callers::OAuthCallers,
    /// Console sign-ins begun at the identity provider, waiting for its answer.
    pub idp_sign_ins: console::PendingSignIns,
    /// Agent connections' own threads, below the calls' priority.
    pub agent_work: agent_work::AgentWork,
}

impl AppState {
    pub fn new(config: Config, mcp: McpServer) -> std::io::Result<Self> {
        let agent_work = agent_work::AgentWork::start(config.agent_nice)?;
        let auth_failures = Arc::new(auth_failures::AuthFailures::new(config.auth_failure_window_ms));
        let console = console::ConsoleSessions::new(config.console_idle_ms, config.console_step_up_ms);
        let services = mcp.services_handle();
        let quotas = quotas::Quotas::new(
            services.catalogue().engines.quota,
            services.repositories().engines.clone(),
            services.clock().clone(),
        );
        let oauth = config.deployment.as_ref().and_then(|d| {
            crate::oauth::resource::ResourceServer::from_deployment(
                d,
                services.catalogue(),
                crate::outbound::Outbound::default(),
                services.clock().clone(),
            )
        });
        let oauth_callers = oauth_callers::OAuthCallers::new(config.auth_cache_ttl_ms);
        let idp_sign_ins = console::PendingSignIns::default();
        Ok(Self {
            config,
            services,
            mcp: Arc::new(mcp),
            auth_failures,
            console,
            quotas,
            oauth,
            oauth_callers,
            idp_sign_ins,
            agent_work,
        })
    }
}

pub use metrics_endpoint::open_router as metrics_router;

/// The agent surface alone, for `--agent-listen` (a listener with caps of its own).
pub fn agent_router(state: Arc<AppState>) -> Router {
    Router::new()
        .route(toolgate_domain::fleet::wire::AGENT_PATH, get(agent_endpoint::agent_socket))
        .fallback(not_found)
        .with_state(state)
}

pub fn router(state: Arc<AppState>) -> Router {
    // The MCP endpoint does the edge's work itself (see mcp_endpoint::exchange).
    let mcp = mcp_endpoint::MCP_PATHS.iter().fold(Router::new(), |r, path| r.route(path, any(mcp_endpoint::mcp)));
    let mcp = mcp.route(mcp_endpoint::TOOLSETS_PATH, any(mcp_endpoint::mcp));
    let guarded = Router::new()
        .merge(api::routes())
        .merge(tokens_api::routes())
        .merge(metrics_endpoint::guarded_route())
        .merge(console::routes())
        .route_layer(from_fn_with_state(state.clone(), edge::edge));
    // Agents connect from other machines by the server's name: no Host/Origin check here;
    // they authenticate in their first frame. A server with an agent listener of its own
    // takes them there only.
    let agents = match state.config.agent_listen {
        Some(_) => get(agent_endpoint::agent_socket_elsewhere),
        None => get(agent_endpoint::agent_socket),
    };
    Router::new()
        .route(toolgate_domain::fleet::wire::AGENT_PATH, agents)
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(oauth_endpoints::routes().route_layer(from_fn_with_state(state.clone(), cors::layer)))
        .merge(mcp)
        .merge(guarded)
        .fallback(not_found)
        .layer(axum::middleware::map_response_with_state(state.clone(), oauth_endpoints::challenge_layer))
        .with_state(state)
}

/// Liveness: the process answers.
async fn healthz() -> Response {
    json_response(StatusCode::OK, json!({"status": "ok"}).to_string())
}

/// Readiness: the store is the file on disk and takes a write.
async fn readyz(axum::extract::State(state): axum::extract::State<Arc<AppState>>) -> Response {
    let services = &state.services;
    match services.repositories().health.check_ready(services.clock().now_ms()).await {
        Ok(()) => json_response(StatusCode::OK, json!({"status": "ready"}).to_string()),
        Err(e) => {
            tracing::error!("not ready: {e}");
            let body = json!({"status": "not_ready", "error": "store_not_ready", "message": e.to_string()});
            json_response(StatusCode::SERVICE_UNAVAILABLE, body.to_string())
        }
    }
}

async fn not_found() -> Response {
    json_response(
        StatusCode::NOT_FOUND,
        json!({"error": "not_found", "message": "the MCP endpoint is POST /mcp (or /mcp/v1/)"}).to_string(),
    )
}

/// A request body, read whole within the body-read timeout and the size limit.
pub async fn read_body<B>(state: &AppState, body: B) -> Result<axum::body::Bytes, ApiError>
where
    B: http_body::Body<Data = axum::body::Bytes>,
    B::Error: Into<axum::BoxError>,
{
    use http_body_util::BodyExt as _;
    let limit = state.config.connections.body_read;
    let whole = http_body_util::Limited::new(body, MAX_BODY_BYTES as usize).collect();
    match tokio::time::timeout(limit, whole).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(_)) => Err(ApiError::bad_request(
            "bad_body",
            "the body could not be read in full (or exceeded its Content-Length)",
        )),
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            format!("the request body did not arrive within {} s", limit.as_secs()),
        )),
    }
}

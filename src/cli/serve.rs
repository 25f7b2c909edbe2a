//! `toolgate serve`'s flags, and the server configuration they make.

use std::path::PathBuf;
use std::time::Duration;

use toolgate_fleet::FleetSettings;

use crate::http::{Config, ConnectionLimits};
use crate::mcp::StreamLimits;
use crate::mcp::sessions::SessionLimits;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: std::net::SocketAddr,
    #[arg(long, value_name = "DIR", default_value = "toolgate-data")]
    data_dir: PathBuf,
    /// An Origin (e.g. https://app.example.com) allowed besides loopback ones; repeatable.
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    allowed_origins: Vec<String>,
    /// Serve the whole catalogue to every tier (calls are still refused by the gate).
    #[arg(long)]
    list_all_tools: bool,
    /// Refuse (and hide) every tool that is not read-class, for every tier.
    #[arg(long)]
    read_only: bool,
    /// Answer every MCP request with -32005 (the approval API keeps working).
    #[arg(long)]
    mcp_disable: bool,
    /// Live handshake-era sessions the server keeps in all; a new one past it is refused (429).
    #[arg(long, value_name = "N", default_value_t = SessionLimits::default().max_total)]
    max_sessions: usize,
    /// Live sessions one principal may hold; a new one past it is refused (429).
    #[arg(long, value_name = "N", default_value_t = SessionLimits::default().max_per_principal)]
    max_sessions_per_principal: usize,
    /// Streams (SSE answers and GET channels) held open at once; past it a call that asks for
    /// a stream gets 429 with -32012 (it may retry, or ask for the plain answer).
    #[arg(long, value_name = "N", default_value_t = StreamLimits::default().max_total)]
    max_streams: usize,
    /// Streamed answers one principal may hold open at once.
    #[arg(long, value_name = "N", default_value_t = StreamLimits::default().max_per_principal)]
    max_streams_per_principal: usize,
    /// GET streams (session channels and resumes) one principal may hold open at once.
    #[arg(long, value_name = "N", default_value_t = StreamLimits::default().max_channels_per_principal)]
    max_channels_per_principal: usize,
    /// A session unused this long expires: 30m, 1h, 90s.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = seconds)]
    session_idle_timeout: i64,
    /// Failed authentications from one address within this window are audited as one row and
    /// a count, not one row each.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = seconds)]
    auth_failure_window: i64,
    /// Audit rows older than this are deleted (checked at start and hourly).
    #[arg(long, value_name = "DURATION", default_value = "365d", value_parser = seconds)]
    audit_retention: i64,
    /// Time to receive a request's head; also how long an idle keep-alive connection lives.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = seconds)]
    header_read_timeout: i64,
    /// Time to receive a request's whole body (408 after it).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = seconds)]
    body_read_timeout: i64,
    /// Connections open at once that have not yet authenticated; past it a new one is closed.
    /// Keep it well below the process's file limit (ulimit -n).
    #[arg(long, value_name = "N", default_value_t = ConnectionLimits::default().max_unauthenticated)]
    max_unauthenticated_connections: usize,
    /// How long an authenticated token is trusted without asking the store again, in
    /// milliseconds: a revocation made elsewhere (the console) takes at most this long.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    auth_cache_ttl_ms: i64,
    /// Serve agents on a listener of their own (e.g. 0.0.0.0:8443), with caps of their own from
    /// the first byte; without it agents connect to --listen.
    #[arg(long, value_name = "ADDRESS")]
    agent_listen: Option<std::net::SocketAddr>,
    /// The compliance rules agents evaluate [default: DATA_DIR/compliance.yaml, if present].
    /// Checked at start (a bad file stops the server) and re-read on SIGHUP (a bad file is
    /// logged and the previous rules stay).
    #[arg(long, value_name = "FILE")]
    compliance: Option<PathBuf>,
    /// Also run an agent on this machine, so the fleet has a real host from the first minute.
    /// It enrolls on first start with a one-use token; its state is DATA_DIR/local-agent.
    #[arg(long)]
    local_agent: bool,
    /// How often agents send a heartbeat, in milliseconds (told to them when they connect).
    #[arg(long, value_name = "MS", default_value_t = FleetSettings::default().heartbeat_ms, value_parser = clap::value_parser!(u64).range(10..))]
    agent_heartbeat_ms: u64,
    /// An agent silent for this many heartbeats is offline and its connection is closed.
    #[arg(long, value_name = "N", default_value_t = FleetSettings::default().missed_heartbeats, value_parser = clap::value_parser!(u32).range(1..))]
    agent_missed_heartbeats: u32,
    /// How often agents re-read their host and report facts and inventory: 1h, 15m, 30s.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = seconds)]
    agent_inventory_interval: i64,
    /// Agent connections open at once; past it a new one is refused as busy (it retries).
    #[arg(long, value_name = "N", default_value_t = FleetSettings::default().max_connections)]
    max_agent_connections: usize,
    /// Agent connections still in their handshake at once; past it a new one gets 503 and
    /// retries. Agents do not use --max-unauthenticated-connections (the MCP endpoint's).
    #[arg(long, value_name = "N", default_value_t = FleetSettings::default().max_handshakes)]
    max_agent_handshakes: usize,
    /// Agents' report uploads taken at once; others wait their turn (up to 1,024 of them for up
    /// to 30 s; past that the agent is told the server is busy and retries later).
    #[arg(long, value_name = "N", default_value_t = FleetSettings::default().max_concurrent_reports as u64, value_parser = clap::value_parser!(u64).range(1..))]
    max_concurrent_reports: u64,
}

/// `30d`, `12h`, `90m`, `45s` or plain seconds, for clap.
fn seconds(text: &str) -> Result<i64, String> {
    super::console::parse_duration(text).map_err(|e| format!("{e:#}"))
}

impl ServeArgs {
    pub fn into_config(self) -> Config {
        let data_dir = self.data_dir.clone();
        Config {
            listen: self.listen,
            data_dir: self.data_dir,
            allowed_origins: self.allowed_origins,
            list_all_tools: self.list_all_tools,
            read_only: self.read_only,
            mcp_disable: self.mcp_disable,
            sessions: SessionLimits {
                max_total: self.max_sessions,
                max_per_principal: self.max_sessions_per_principal,
                idle_ms: self.session_idle_timeout * 1000,
            },
            streams: StreamLimits {
                max_total: self.max_streams,
                max_per_principal: self.max_streams_per_principal,
                max_channels_per_principal: self.max_channels_per_principal,
            },
            auth_failure_window_ms: self.auth_failure_window * 1000,
            audit_retention_ms: self.audit_retention * 1000,
            connections: ConnectionLimits {
                header_read: Duration::from_secs(self.header_read_timeout as u64),
                body_read: Duration::from_secs(self.body_read_timeout as u64),
                max_unauthenticated: self.max_unauthenticated_connections,
            },
            auth_cache_ttl_ms: self.auth_cache_ttl_ms,
            fleet: FleetSettings {
                heartbeat_ms: self.agent_heartbeat_ms,
                missed_heartbeats: self.agent_missed_heartbeats,
                inventory_interval_ms: (self.agent_inventory_interval.max(1) * 1000) as u64,
                max_connections: self.max_agent_connections,
                max_handshakes: self.max_agent_handshakes,
                max_concurrent_reports: self.max_concurrent_reports as usize,
            },
            local_agent: self.local_agent,
            compliance: crate::compliance::RuleSource::new(self.compliance, &data_dir),
            agent_listen: self.agent_listen,
        }
    }
}

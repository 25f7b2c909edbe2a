//! `toolgate serve`'s flags, and the server configuration they make.

use std::path::PathBuf;
use std::time::Duration;

use toolgate_fleet::FleetSettings;

use crate::http::{Config, ConnectionLimits, TlsFiles};
use crate::logging::LogFormat;
use crate::mcp::sessions::SessionLimits;
use crate::mcp::{AnswerLimits, StreamLimits};

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[arg(long, default_value = "127.0.0.1:8080", env = "TOOLGATE_LISTEN")]
    listen: std::net::SocketAddr,
    #[arg(long, value_name = "DIR", default_value = "toolgate-data", env = "TOOLGATE_DATA_DIR")]
    data_dir: PathBuf,
    /// `sqlite` (the file in --data-dir; the default) or a PostgreSQL URL,
    /// postgres://user:password@host:port/database: several replicas share one database.
    #[arg(long, value_name = "URL", env = "TOOLGATE_DATABASE")]
    database: Option<String>,
    /// This server's name in a shared database's rows (the audit log) [default: HOST:PORT]
    #[arg(long, value_name = "NAME", env = "TOOLGATE_REPLICA")]
    replica: Option<String>,
    /// An Origin (e.g. https://app.example.com) allowed besides loopback ones; repeatable (the
    /// variable takes a comma-separated list).
    #[arg(long = "allowed-origin", value_name = "ORIGIN", env = "TOOLGATE_ALLOWED_ORIGIN", value_delimiter = ',')]
    allowed_origins: Vec<String>,
    /// Serve the whole catalogue to every tier (calls are still refused by the gate).
    #[arg(long, env = "TOOLGATE_LIST_ALL_TOOLS")]
    list_all_tools: bool,
    /// Refuse (and hide) every tool that is not read-class, for every tier.
    #[arg(long, env = "TOOLGATE_READ_ONLY")]
    read_only: bool,
    /// Answer every MCP request with -32005 (the approval API keeps working).
    #[arg(long, env = "TOOLGATE_MCP_DISABLE")]
    mcp_disable: bool,
    /// Behind a proxy that buffers responses: plain JSON answers only (no SSE, no sessions;
    /// GET and DELETE /mcp are 405). Progress then comes only in a call's final result.
    #[arg(long, env = "TOOLGATE_MCP_NO_STREAMING")]
    mcp_no_streaming: bool,
    /// Live handshake-era sessions the server keeps in all; a new one past it is refused (429).
    #[arg(long, value_name = "N", default_value_t = SessionLimits::default().max_total, env = "TOOLGATE_MAX_SESSIONS")]
    max_sessions: usize,
    /// Live sessions one principal may hold; a new one past it is refused (429).
    #[arg(long, value_name = "N", default_value_t = SessionLimits::default().max_per_principal, env = "TOOLGATE_MAX_SESSIONS_PER_PRINCIPAL")]
    max_sessions_per_principal: usize,
    /// Streams (SSE answers and GET channels) held open at once; past it a call that asks for
    /// a stream gets 429 with -32012 (it may retry, or ask for the plain answer).
    #[arg(long, value_name = "N", default_value_t = StreamLimits::default().max_total, env = "TOOLGATE_MAX_STREAMS")]
    max_streams: usize,
    /// Streamed answers one principal may hold open at once.
    #[arg(long, value_name = "N", default_value_t = StreamLimits::default().max_per_principal, env = "TOOLGATE_MAX_STREAMS_PER_PRINCIPAL")]
    max_streams_per_principal: usize,
    /// GET streams (session channels and resumes) one principal may hold open at once.
    #[arg(long, value_name = "N", default_value_t = StreamLimits::default().max_channels_per_principal, env = "TOOLGATE_MAX_CHANNELS_PER_PRINCIPAL")]
    max_channels_per_principal: usize,
    /// The largest answer one tools/call may send, in bytes; a larger one is replaced by an
    /// error saying how to ask for less.
    #[arg(long, value_name = "BYTES", default_value_t = AnswerLimits::default().max_answer_bytes, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..), env = "TOOLGATE_MAX_ANSWER_BYTES")]
    max_answer_bytes: usize,
    /// The largest a 2025-03-26 batch's answers may grow together, in bytes; its remaining
    /// requests are then not run, each answered with an error.
    #[arg(long, value_name = "BYTES", default_value_t = AnswerLimits::default().max_batch_bytes, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..), env = "TOOLGATE_MAX_BATCH_ANSWER_BYTES")]
    max_batch_answer_bytes: usize,
    /// The size one page of a listing tool's answer stays under, in bytes: the rows that fit,
    /// whole, and a cursor for the rest (docs/paging.md). At most --max-answer-bytes; 64 KiB,
    /// or --max-answer-bytes when that is less, unless given.
    #[arg(long, value_name = "BYTES", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..), env = "TOOLGATE_PAGE_BYTES")]
    page_bytes: Option<usize>,
    /// How long a stream lives on while its credential cannot be checked (the store is
    /// down) before it ends with `auth_unavailable`: 60s, 5m.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = seconds, env = "TOOLGATE_STREAM_AUTH_GRACE")]
    stream_auth_grace: i64,
    /// A session unused this long expires: 30m, 1h, 90s.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = seconds, env = "TOOLGATE_SESSION_IDLE_TIMEOUT")]
    session_idle_timeout: i64,
    /// Failed authentications from one address within this window are audited as one row and
    /// a count, not one row each.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = seconds, env = "TOOLGATE_AUTH_FAILURE_WINDOW")]
    auth_failure_window: i64,
    /// Audit rows older than this are deleted (checked at start and hourly).
    #[arg(long, value_name = "DURATION", default_value = "365d", value_parser = seconds, env = "TOOLGATE_AUDIT_RETENTION")]
    audit_retention: i64,
    /// Time to receive a request's head; also how long an idle keep-alive connection lives.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = seconds, env = "TOOLGATE_HEADER_READ_TIMEOUT")]
    header_read_timeout: i64,
    /// Time to receive a request's whole body (408 after it).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = seconds, env = "TOOLGATE_BODY_READ_TIMEOUT")]
    body_read_timeout: i64,
    /// Connections open at once that have not yet authenticated; past it a new one is closed.
    /// Keep it well below the process's file limit (ulimit -n).
    #[arg(long, value_name = "N", default_value_t = ConnectionLimits::default().max_unauthenticated, env = "TOOLGATE_MAX_UNAUTHENTICATED_CONNECTIONS")]
    max_unauthenticated_connections: usize,
    /// Of those, how many one source address may hold (behind a reverse proxy every client
    /// has the proxy's address: set it to --max-unauthenticated-connections there).
    #[arg(long, value_name = "N", default_value_t = ConnectionLimits::default().max_unauthenticated_per_address, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..), env = "TOOLGATE_MAX_UNAUTHENTICATED_PER_ADDRESS")]
    max_unauthenticated_per_address: usize,
    /// Past --max-unauthenticated-connections, connections still taken for /healthz, /readyz
    /// and agents (anything else on them is answered 503).
    #[arg(long, value_name = "N", default_value_t = ConnectionLimits::default().reserved, env = "TOOLGATE_RESERVED_CONNECTIONS")]
    reserved_connections: usize,
    /// How long an authenticated token is trusted without asking the store again, in
    /// milliseconds: a revocation made elsewhere (the console) takes at most this long.
    #[arg(long, value_name = "MS", default_value_t = 1000, env = "TOOLGATE_AUTH_CACHE_TTL_MS")]
    auth_cache_ttl_ms: i64,
    /// Serve agents on a listener of their own (e.g. 0.0.0.0:8443), with caps of their own from
    /// the first byte; without it agents connect to --listen.
    #[arg(long, value_name = "ADDRESS", env = "TOOLGATE_AGENT_LISTEN")]
    agent_listen: Option<std::net::SocketAddr>,
    /// The compliance rules agents evaluate [default: DATA_DIR/compliance.yaml, if present].
    /// Checked at start (a bad file stops the server) and re-read on SIGHUP (a bad file is
    /// logged and the previous rules stay).
    #[arg(long, value_name = "FILE", env = "TOOLGATE_COMPLIANCE")]
    compliance: Option<PathBuf>,
    /// The deployment settings: the public URL and sign-in through the organisation's identity
    /// provider (docs/sign-in.md) [default: DATA_DIR/toolgate.yaml, if present]. Checked at
    /// start: a bad file stops the server.
    #[arg(long, value_name = "FILE", env = "TOOLGATE_CONFIG")]
    config: Option<PathBuf>,
    /// The key-encryption keys plugin secrets are sealed under (docs/secrets.md), the same
    /// file on every replica; or give their text in TOOLGATE_KEK. Without either, the secret
    /// tools are refused.
    #[arg(long, value_name = "FILE", env = "TOOLGATE_KEK_FILE")]
    kek_file: Option<PathBuf>,
    /// Also run an agent on this machine, so the fleet has a real host from the first minute.
    /// It enrolls on first start with a one-use token; its state is DATA_DIR/local-agent.
    #[arg(long, env = "TOOLGATE_LOCAL_AGENT")]
    local_agent: bool,
    /// How often agents send a heartbeat, in milliseconds (told to them when they connect).
    #[arg(long, value_name = "MS", default_value_t = FleetSettings::default().heartbeat_ms, value_parser = clap::value_parser!(u64).range(10..), env = "TOOLGATE_AGENT_HEARTBEAT_MS")]
    agent_heartbeat_ms: u64,
    /// An agent silent for this many heartbeats is offline and its connection is closed.
    #[arg(long, value_name = "N", default_value_t = FleetSettings::default().missed_heartbeats, value_parser = clap::value_parser!(u32).range(1..), env = "TOOLGATE_AGENT_MISSED_HEARTBEATS")]
    agent_missed_heartbeats: u32,
    /// How often agents re-read their host and report facts and inventory: 1h, 15m, 30s.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = seconds, env = "TOOLGATE_AGENT_INVENTORY_INTERVAL")]
    agent_inventory_interval: i64,
    /// How often agents sample their experience (docs/experience.md): 60s, 10s, 1s.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = seconds, env = "TOOLGATE_EXPERIENCE_SAMPLE_INTERVAL")]
    experience_sample_interval: i64,
    /// How often agents send the experience samples they took: 5m, 30s.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = seconds, env = "TOOLGATE_EXPERIENCE_REPORT_INTERVAL")]
    experience_report_interval: i64,
    /// How long experience samples are kept as taken; hourly and daily summaries of them are
    /// kept longer (--experience-hourly-retention, --experience-daily-retention).
    #[arg(long, value_name = "DURATION", default_value = "1d", value_parser = seconds, env = "TOOLGATE_EXPERIENCE_RAW_RETENTION")]
    experience_raw_retention: i64,
    #[arg(long, value_name = "DURATION", default_value = "30d", value_parser = seconds, env = "TOOLGATE_EXPERIENCE_HOURLY_RETENTION")]
    experience_hourly_retention: i64,
    #[arg(long, value_name = "DURATION", default_value = "400d", value_parser = seconds, env = "TOOLGATE_EXPERIENCE_DAILY_RETENTION")]
    experience_daily_retention: i64,
    /// Agent connections open at once; past it a new one is refused as busy (it retries).
    #[arg(long, value_name = "N", default_value_t = FleetSettings::default().max_connections, env = "TOOLGATE_MAX_AGENT_CONNECTIONS")]
    max_agent_connections: usize,
    /// Agent connections still in their handshake at once; past it a new one gets 503 and
    /// retries. Agents do not use --max-unauthenticated-connections (the MCP endpoint's).
    #[arg(long, value_name = "N", default_value_t = FleetSettings::default().max_handshakes, env = "TOOLGATE_MAX_AGENT_HANDSHAKES")]
    max_agent_handshakes: usize,
    /// The niceness of the threads that take agents' connections and reports, 0 to 19. When
    /// the core is busy a call's work goes first, the agents' takes what is left (an agent
    /// keeps its report until it is acknowledged); 0 shares the core evenly.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(i32).range(0..=19), env = "TOOLGATE_AGENT_NICE")]
    agent_nice: i32,
    /// Agents' report uploads taken at once; others wait their turn (up to 1,024 of them for up
    /// to 30 s; past that the agent is told the server is busy and retries later).
    #[arg(long, value_name = "N", default_value_t = FleetSettings::default().max_concurrent_reports as u64, value_parser = clap::value_parser!(u64).range(1..), env = "TOOLGATE_MAX_CONCURRENT_REPORTS")]
    max_concurrent_reports: u64,
    /// A report connection silent this long between frames is closed, in milliseconds (an
    /// agent sends its frames at once; each agent may hold two report connections).
    #[arg(long, value_name = "MS", default_value_t = FleetSettings::default().report_idle_ms, value_parser = clap::value_parser!(u64).range(100..), env = "TOOLGATE_AGENT_REPORT_IDLE_MS")]
    agent_report_idle_ms: u64,
    /// How long an agent's client certificate is valid, in seconds; the agent asks for a new
    /// one past half of it (docs/trust.md). Needs a key-encryption key: the CA is sealed by it.
    #[arg(long, value_name = "SECONDS", default_value_t = 86_400, value_parser = clap::value_parser!(i64).range(10..=31_536_000), env = "TOOLGATE_AGENT_CERT_LIFETIME")]
    agent_cert_lifetime: i64,
    /// How often each replica reads the revoked certificates, in milliseconds: an agent whose
    /// certificate is revoked on another replica is cut off within it (docs/trust.md).
    #[arg(long, value_name = "MS", default_value_t = FleetSettings::default().revocation_check_ms, value_parser = clap::value_parser!(u64).range(100..=3_600_000), env = "TOOLGATE_CERT_REVOCATION_CHECK_MS")]
    cert_revocation_check_ms: u64,
    /// Serve Prometheus metrics at /metrics on this address of their own (e.g. 127.0.0.1:9464),
    /// without authentication. Without it, /metrics is on --listen and needs an
    /// administrator's API token (`toolgate token create --api`).
    #[arg(long, value_name = "ADDRESS", env = "TOOLGATE_METRICS_LISTEN")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Serve HTTPS with this certificate chain (PEM); needs --tls-key. Both files are read
    /// again on SIGHUP (a bad pair is logged and the previous one stays).
    #[arg(long, value_name = "FILE", env = "TOOLGATE_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", env = "TOOLGATE_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// The agent listener's own certificate chain (PEM), instead of --tls-cert's: agents are
    /// asked there for their client certificates (mutual TLS, docs/trust.md) while MCP and the
    /// console keep theirs. Needs --agent-listen and --agent-tls-key; read again on SIGHUP.
    #[arg(long, value_name = "FILE", env = "TOOLGATE_AGENT_TLS_CERT", requires_all = ["agent_tls_key", "agent_listen"])]
    agent_tls_cert: Option<PathBuf>,
    /// The agent listener certificate's private key (PEM).
    #[arg(long, value_name = "FILE", env = "TOOLGATE_AGENT_TLS_KEY", requires = "agent_tls_cert")]
    agent_tls_key: Option<PathBuf>,
    /// How log lines are written on standard error.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "TOOLGATE_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// A console session unused this long is signed out: 15m, 1h.
    #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = seconds, env = "TOOLGATE_CONSOLE_IDLE_TIMEOUT")]
    console_idle_timeout: i64,
    /// How old a console proof (a TOTP code, or a sign-in at the identity provider) may be
    /// for a decision; past it the person proves again: 5m, 2m.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = seconds, env = "TOOLGATE_CONSOLE_STEP_UP_WINDOW")]
    console_step_up_window: i64,
}

/// `30d`, `12h`, `90m`, `45s` or plain seconds, for clap.
fn seconds(text: &str) -> Result<i64, String> {
    super::console::parse_duration(text).map_err(|e| format!("{e:#}"))
}

impl ServeArgs {
    pub fn into_config(self) -> anyhow::Result<Config> {
        let page_bytes = match self.page_bytes {
            Some(bytes) if bytes > self.max_answer_bytes => anyhow::bail!(
                "--page-bytes ({bytes}) is more than --max-answer-bytes ({}): every full page would be refused; lower it, or raise the cap",
                self.max_answer_bytes
            ),
            Some(bytes) => bytes,
            None => AnswerLimits::default().page_bytes.min(self.max_answer_bytes),
        };
        let data_dir = self.data_dir.clone();
        let database = crate::database::Database::from_flags(&self.data_dir, self.database.as_deref())?;
        let kek = match (self.kek_file, std::env::var("TOOLGATE_KEK").ok().filter(|t| !t.trim().is_empty())) {
            (Some(_), Some(_)) => anyhow::bail!(
                "give the key-encryption keys once: --kek-file (TOOLGATE_KEK_FILE) or TOOLGATE_KEK, not both"
            ),
            (Some(path), None) => crate::sealing::vault::KeySource::File(path),
            (None, Some(text)) => crate::sealing::vault::KeySource::Variable(text),
            (None, None) => crate::sealing::vault::KeySource::Absent,
        };
        let deployment = crate::deployment::load(self.config.as_deref(), &self.data_dir, &crate::registry::CATALOGUE)
            .map_err(anyhow::Error::msg)?;
        let uploads = crate::deployment::upload_limits(deployment.as_ref(), &crate::registry::CATALOGUE)
            .map_err(anyhow::Error::msg)?;
        let replica = self.replica.unwrap_or_else(|| format!("{}:{}", host_name(), self.listen.port()));
        Ok(Config {
            listen: self.listen,
            data_dir: self.data_dir,
            database,
            replica,
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
                auth_unavailable_grace: Duration::from_secs(self.stream_auth_grace.max(0) as u64),
                max_total: self.max_streams,
                max_per_principal: self.max_streams_per_principal,
                max_channels_per_principal: self.max_channels_per_principal,
                plain_json_only: self.mcp_no_streaming,
            },
            answers: AnswerLimits {
                max_answer_bytes: self.max_answer_bytes,
                max_batch_bytes: self.max_batch_answer_bytes,
                page_bytes,
            },
            auth_failure_window_ms: self.auth_failure_window * 1000,
            audit_retention_ms: self.audit_retention * 1000,
            connections: ConnectionLimits {
                header_read: Duration::from_secs(self.header_read_timeout as u64),
                body_read: Duration::from_secs(self.body_read_timeout as u64),
                max_unauthenticated: self.max_unauthenticated_connections,
                max_unauthenticated_per_address: self.max_unauthenticated_per_address,
                reserved: self.reserved_connections,
            },
            auth_cache_ttl_ms: self.auth_cache_ttl_ms,
            fleet: FleetSettings {
                heartbeat_ms: self.agent_heartbeat_ms,
                missed_heartbeats: self.agent_missed_heartbeats,
                inventory_interval_ms: (self.agent_inventory_interval.max(1) * 1000) as u64,
                experience_sample_ms: (self.experience_sample_interval.max(1) * 1000) as u64,
                experience_report_ms: (self.experience_report_interval.max(1) * 1000) as u64,
                experience_retention: toolgate_store::Retention {
                    raw_ms: self.experience_raw_retention.max(1) * 1000,
                    hourly_ms: self.experience_hourly_retention.max(1) * 1000,
                    daily_ms: self.experience_daily_retention.max(1) * 1000,
                },
                max_connections: self.max_agent_connections,
                max_handshakes: self.max_agent_handshakes,
                max_concurrent_reports: self.max_concurrent_reports as usize,
                report_idle_ms: self.agent_report_idle_ms,
                revocation_check_ms: self.cert_revocation_check_ms,
            },
            agent_nice: self.agent_nice,
            local_agent: self.local_agent,
            compliance: crate::compliance::RuleSource::new(self.compliance, &data_dir),
            deployment,
            uploads,
            agent_cert_lifetime_secs: self.agent_cert_lifetime,
            kek,
            agent_listen: self.agent_listen,
            metrics_listen: self.metrics_listen,
            tls: self.tls_cert.zip(self.tls_key).map(|(cert, key)| TlsFiles { cert, key, flags: "--tls" }),
            agent_tls: self.agent_tls_cert.zip(self.agent_tls_key).map(|(cert, key)| TlsFiles {
                cert,
                key,
                flags: "--agent-tls",
            }),
            console_idle_ms: self.console_idle_timeout * 1000,
            console_step_up_ms: self.console_step_up_window * 1000,
        })
    }
}

/// This machine's name (the kernel's), for the default replica name.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "toolgate".into())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[derive(clap::Parser)]
    struct Serve {
        #[command(flatten)]
        args: super::ServeArgs,
    }

    #[derive(clap::Parser)]
    struct AgentRun {
        #[command(flatten)]
        args: toolgate_agent::cli::RunArgs,
    }

    /// Every flag of `serve` and `agent run` also reads TOOLGATE_ and its name; the build-time
    /// variables keep their meaning only.
    #[test]
    fn every_flag_reads_its_variable() {
        for command in [Serve::command(), AgentRun::command()] {
            for arg in command.get_arguments().filter(|a| a.get_id() != "help") {
                let long = arg.get_long().expect("a long flag");
                let env = arg.get_env().unwrap_or_else(|| panic!("--{long} reads no variable"));
                assert_eq!(env.to_str(), Some(format!("TOOLGATE_{}", long.to_uppercase().replace('-', "_")).as_str()));
                assert!(!["TOOLGATE_TOOLS", "TOOLGATE_POLICY", "TOOLGATE_LOG"].contains(&env.to_str().unwrap()));
            }
        }
    }
}

//! The agent's command line (feature `cli`): the options `toolgate-agent` and `toolgate agent
//! run` share, and the run itself until a signal stops it. One definition, so the lean binary
//! and the server's subcommand cannot drift apart.

use std::path::PathBuf;
use std::process::ExitCode;

/// How log lines are written on standard error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The agent's options: `toolgate-agent`'s command line, and `toolgate agent run`'s.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The server's URL, e.g. https://toolgate.example.com:8443 (http:// only on a trusted
    /// network: the agent's credential travels in it). Repeat it (or list them, comma-separated,
    /// in the variable) for the replicas of one deployment: the agent moves to the next one
    /// when the one it uses cannot be reached.
    #[arg(long, env = "TOOLGATE_SERVER", value_delimiter = ',', required = true)]
    pub server: Vec<String>,
    /// An enrollment token (first run only; `toolgate enroll-token create` mints one).
    #[arg(long, env = "TOOLGATE_ENROLL_TOKEN")]
    pub enroll_token: Option<String>,
    /// Where the agent keeps its identity (created 0700; the file inside is 0600).
    #[arg(long, value_name = "DIR", env = "TOOLGATE_STATE_DIR")]
    pub state_dir: PathBuf,
    /// After a lost connection, wait a random time up to this before reconnecting (ms), so a
    /// fleet does not return all at once after a server restart.
    #[arg(long, value_name = "MS", default_value_t = 10_000, env = "TOOLGATE_RECONNECT_SPREAD_MS")]
    pub reconnect_spread_ms: u64,
    /// Failed attempts back off exponentially up to this (ms).
    #[arg(long, value_name = "MS", default_value_t = 60_000, env = "TOOLGATE_RECONNECT_MAX_MS")]
    pub reconnect_max_ms: u64,
    /// While quarantined, also cut this host's network except the connection to the server
    /// (an nftables table of the agent's own, `toolgate_quarantine`). Needs root and nft;
    /// without it quarantine is soft: instructions are refused, the network is left alone.
    #[arg(long, env = "TOOLGATE_ALLOW_NETWORK_ISOLATION")]
    pub allow_network_isolation: bool,
    /// With an https:// server: trust only this CA (PEM) for its certificate, instead of the
    /// system's trusted roots.
    #[arg(long, value_name = "FILE", env = "TOOLGATE_CA")]
    pub ca: Option<PathBuf>,
    /// What experience telemetry measures (docs/experience.md): `auto` (this container's
    /// cgroup when in one, else the host), `host`, `cgroup` (in a container its cgroup,
    /// outside one the agent's own) or `off`.
    #[arg(long, value_enum, default_value_t = crate::experience::Measure::Auto, env = "TOOLGATE_MEASURE")]
    pub measure: crate::experience::Measure,
    /// How log lines are written on standard error.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "TOOLGATE_LOG_FORMAT")]
    pub log_format: LogFormat,
}

impl RunArgs {
    pub fn into_options(self) -> crate::AgentOptions {
        crate::AgentOptions {
            servers: self.server,
            enroll_token: self.enroll_token,
            state_dir: self.state_dir,
            reconnect_spread_ms: self.reconnect_spread_ms,
            reconnect_max_ms: self.reconnect_max_ms,
            allow_network_isolation: self.allow_network_isolation,
            trust: self.ca.map_or(crate::ServerTrust::System, crate::ServerTrust::Ca),
            measure: self.measure,
        }
    }
}

/// Runs the agent until it fails or Ctrl-C (SIGINT) stops it, on a runtime of its own, with
/// logging set up by `init_logging`; the exit code says why it ended.
pub fn run(args: RunArgs, init_logging: impl FnOnce(LogFormat)) -> ExitCode {
    init_logging(args.log_format);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the agent's runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stop = toolgate_domain::CancellationToken::new();
    let ran = runtime.block_on(async {
        let on_signal = stop.clone();
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            on_signal.cancel();
        });
        crate::run(args.into_options(), stop).await
    });
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// The lean binary's logging: `TOOLGATE_LOG` sets the level (default `info`).
pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLGATE_LOG").unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}

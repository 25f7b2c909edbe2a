//! toolgate's endpoint agent. It enrolls once with an enrollment token, keeps its identity in
//! its state dir, and holds one outbound WebSocket to the server: facts and inventory on
//! connect and on the server's schedule, a heartbeat every interval, and a jittered backoff
//! whenever the connection is lost. It never runs a shell: it reads its host ([`collect`]) and
//! runs the actions its plugin manifests declare ([`plugins`]), changes at most once ([`journal`]).

pub mod certificate;
#[cfg(feature = "cli")]
pub mod cli;
pub mod collect;
mod compliance;
mod connection;
mod delivery;
pub mod experience;
mod frames;
pub mod isolation;
pub mod journal;
pub mod plugins;
mod servers;
pub mod signed;
pub mod state;
pub mod tls;
mod uploads;
mod worker;

use std::path::PathBuf;

pub use connection::{Reporter, ThisHost, now_ms, run, run_with};
pub use servers::Servers;
pub use tls::{Endpoint, ServerTrust};
use toolgate_domain::fleet::wire::RefusalCode;

/// How the agent runs.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    /// The server's base URL: https://host:port (or wss://), http:// (or ws://); several for
    /// the replicas of one deployment, tried in turn when one cannot be reached.
    pub servers: Vec<String>,
    /// Needed on the first run only; ignored once the state dir holds an identity.
    pub enroll_token: Option<String>,
    pub state_dir: PathBuf,
    /// The first retry after a lost connection waits a random time up to this, so that a
    /// fleet reconnecting after a server restart arrives spread out, not all at once.
    pub reconnect_spread_ms: u64,
    /// Failed attempts back off exponentially from one second up to this.
    pub reconnect_max_ms: u64,
    /// While quarantined, also cut the host's network but for the server (nftables; root).
    pub allow_network_isolation: bool,
    /// Whom to trust for an https:// server's certificate.
    pub trust: ServerTrust,
    /// What experience telemetry measures, when a server asks for it.
    pub measure: experience::Measure,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("the server refused the agent ({code:?}): {message}")]
    Refused { code: RefusalCode, message: String },
    #[error("the agent was revoked: {0}")]
    Revoked(String),
    #[error("{path}: {message}", path = path.display())]
    State { path: PathBuf, message: String },
    #[error("bad --server URL `{0}`: expected https://host:port or http://host:port (one or more)")]
    BadServerUrl(String),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("--allow-network-isolation needs root (it changes the host's nftables rule set)")]
    IsolationNeedsRoot,
    #[error(
        "not enrolled: {state} holds no identity; pass --enroll-token (mint one on the server with `toolgate enroll-token create`)",
        state = .0.display()
    )]
    NotEnrolled(PathBuf),
}

impl AgentError {
    /// The process exit code for this error (documented in docs/agents.md).
    pub fn exit_code(&self) -> u8 {
        match self {
            AgentError::Refused { .. } => 3,
            AgentError::Revoked(_) => 4,
            AgentError::State { .. } | AgentError::NotEnrolled(_) => 2,
            AgentError::BadServerUrl(_) | AgentError::Tls(_) | AgentError::IsolationNeedsRoot => 2,
        }
    }
}

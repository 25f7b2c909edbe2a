//! `serve --local-agent`: an agent on the server's own machine, in the server's process, so a
//! newcomer's fleet has a real host at once. It is the same agent an endpoint runs, speaking
//! the same protocol over loopback; on first start it enrolls with a one-use token.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use toolgate_agent::{AgentOptions, ServerTrust, state};
use toolgate_domain::CancellationToken;
use toolgate_fleet::Hub;

use super::tls::ServedCertificate;

/// The local agent's state dir, inside the data dir.
pub const LOCAL_AGENT_DIR: &str = "local-agent";
/// How long the local agent's enrollment token lives (it is used at once).
const ENROLL_TOKEN_MS: i64 = 10 * 60 * 1000;

/// `tls`: the certificate the server serves, if it serves HTTPS; the local agent then trusts
/// exactly that certificate (it reaches its own server over loopback, whatever names the
/// certificate carries).
pub async fn start(
    hub: &Hub,
    data_dir: &Path,
    local: SocketAddr,
    tls: Option<Arc<ServedCertificate>>,
    stop: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>> {
    let state_dir = data_dir.join(LOCAL_AGENT_DIR);
    let enroll_token = match state::load(&state_dir)? {
        Some(_) => None,
        None => {
            let now = hub.clock().now_ms();
            let (_, secret) = hub
                .store()
                .create_enrollment_token(now + ENROLL_TOKEN_MS, 1, now)
                .await
                .context("cannot mint the local agent's enrollment token")?;
            Some(secret)
        }
    };
    // A server listening on every address is reached over loopback.
    let host = match local.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    let (scheme, trust) = match tls {
        Some(served) => ("https", ServerTrust::Verifier(super::tls::trusting_served(served))),
        None => ("http", ServerTrust::System),
    };
    let options = AgentOptions {
        servers: vec![format!("{scheme}://{}", SocketAddr::new(host, local.port()))],
        enroll_token,
        state_dir,
        reconnect_spread_ms: 1_000,
        reconnect_max_ms: 30_000,
        // The server's own host: quarantining it never cuts the machine's network.
        allow_network_isolation: false,
        trust,
        measure: toolgate_agent::experience::Measure::Auto,
    };
    println!("toolgate: a local agent reports this machine ({})", options.state_dir.display());
    Ok(tokio::spawn(async move {
        if let Err(e) = toolgate_agent::run(options, stop).await {
            tracing::error!("the local agent stopped: {e}");
        }
    }))
}

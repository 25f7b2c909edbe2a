//! `toolgate-agent-load SERVER_URL ENROLL_TOKEN STATE_ROOT N [SPREAD_MS]`: runs N agents in one
//! process, each through the real agent loop (`toolgate_agent::run_with`: enrollment, state dir,
//! heartbeats, reconnection with jitter). What they report is labelled as simulated: this
//! host's facts with the hostname `load-NNNNN` and agent version `load`, and this host's real
//! `users` and `listening_ports` tables (LOAD_TABLES=users,installed_software,... for others).
//! LOAD_EXPERIENCE=1 makes each agent report simulated experience samples ([`experience`]) when
//! the server asks for them. Not a mode of the product: a benchmark's load
//! (scripts/bench_fleet.sh). LOAD_CA=FILE trusts that CA for an https:// server (the agent
//! listener with mutual TLS, scripts/bench_agent_tls.sh). Runs until Ctrl-C or SIGTERM.

mod experience;

use std::path::PathBuf;
use std::sync::Arc;

use toolgate_agent::{AgentOptions, Reporter, collect, now_ms};
use toolgate_domain::CancellationToken;
use toolgate_domain::fleet::HostFacts;
use toolgate_domain::fleet::wire::InventoryReport;

/// The tables each simulated agent reports (read once from this host, shared), unless
/// LOAD_TABLES names others (comma-separated).
const TABLES: &str = "users,listening_ports";

struct Simulated {
    number: u64,
    facts: HostFacts,
    tables: Arc<Vec<InventoryReport>>,
    experience: bool,
}

impl Reporter for Simulated {
    fn read(&self) -> (HostFacts, Vec<InventoryReport>) {
        let now = now_ms();
        let tables = self.tables.iter().cloned().map(|mut t| {
            t.collected_at_ms = now;
            t
        });
        (self.facts.clone(), tables.collect())
    }

    fn experience_sample(&self, at_ms: i64) -> Option<toolgate_domain::fleet::experience::Sample> {
        self.experience.then(|| experience::sample(self.number, at_ms))
    }
}

fn usage() -> ! {
    eprintln!("usage: toolgate-agent-load SERVER_URL ENROLL_TOKEN STATE_ROOT N [SPREAD_MS]");
    std::process::exit(2)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [server, token, root, n, rest @ ..] = args.as_slice() else { usage() };
    let Ok(n) = n.parse::<usize>() else { usage() };
    let spread_ms = rest.first().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let host = collect::host_facts();
    let wanted = std::env::var("LOAD_TABLES").unwrap_or_else(|_| TABLES.into());
    let wanted: Vec<&str> = wanted.split(',').collect();
    let tables: Vec<InventoryReport> =
        collect::all_tables(now_ms).into_iter().filter(|t| wanted.contains(&t.table.as_str())).collect();
    let tables = Arc::new(tables);
    let trust = match std::env::var_os("LOAD_CA") {
        Some(path) => toolgate_agent::ServerTrust::Ca(path.into()),
        None => toolgate_agent::ServerTrust::System,
    };
    let simulate_experience = std::env::var("LOAD_EXPERIENCE").is_ok_and(|v| v == "1");
    let stop = CancellationToken::new();
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let facts = HostFacts { hostname: format!("load-{i:05}"), agent_version: "load".into(), ..host.clone() };
        let reporter =
            Arc::new(Simulated { number: i as u64, facts, tables: tables.clone(), experience: simulate_experience });
        let options = AgentOptions {
            servers: vec![server.clone()],
            enroll_token: Some(token.clone()),
            state_dir: PathBuf::from(root).join(format!("{i:05}")),
            reconnect_spread_ms: spread_ms,
            reconnect_max_ms: 30_000,
            allow_network_isolation: false,
            trust: trust.clone(),
            // Simulated hosts have no experience of their own: none, or simulated samples.
            measure: match simulate_experience {
                true => toolgate_agent::experience::Measure::Host,
                false => toolgate_agent::experience::Measure::Off,
            },
        };
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            if let Err(e) = toolgate_agent::run_with(options, stop, reporter).await {
                eprintln!("agent {i}: {e}");
            }
        }));
        // Enrollment writes a state file each: start them at a steady pace, not all at once.
        if i % 100 == 99 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    eprintln!("toolgate-agent-load: {n} agents started");
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM");
    tokio::select! { _ = tokio::signal::ctrl_c() => {}, _ = terminate.recv() => {} }
    stop.cancel();
    for task in tasks {
        let _ = task.await;
    }
}

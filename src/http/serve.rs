//! Startup: the store (created with an admin and a demo token on first start), the services,
//! the MCP server, the listener; and a graceful shutdown that drains the audit writer.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};
use toolgate_domain::tokens::NewToken;
use toolgate_domain::{CancellationToken, Clock};
use toolgate_fleet::Hub;
use toolgate_store::{AuditWriter, Repositories};

use super::tls::ServedCertificate;
use super::upkeep::Upkeep;
use super::{AppState, Config, ConnectionLimits, agent_router, router};
use crate::mcp::{McpServer, Options};
use crate::registry::{DEMO_TOKEN_TIER, FIRST_START_ROLE, ToolId};
use crate::services::Services;

/// How long the demo token lives.
const DEMO_TOKEN_SECS: i64 = 30 * 24 * 3600;

/// Opens the store; on an empty one, creates `admin` and prints a demo token once.
pub async fn bootstrap(config: &Config, local: SocketAddr, clock: &Clock) -> Result<Repositories> {
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("cannot create data dir {}", config.data_dir.display()))?;
    let store = config.database.open(true, &config.replica).await?;
    // Authentication is answered from a cache that never outlives a revocation made elsewhere
    // (the console) by more than its time to live; one made through this server, at once.
    let repositories = store.with_auth_cache(clock.clone(), config.auth_cache_ttl_ms);
    let credentials = &repositories.credentials;
    if credentials.principal_count().await? == 0 {
        let now = clock.now_secs();
        credentials.put_principal("admin", &[FIRST_START_ROLE.to_string()], now).await?;
        let tier = DEMO_TOKEN_TIER.name();
        let new = NewToken {
            principal: "admin",
            tier: Some(tier),
            name: "demo",
            now,
            expires_at: now + DEMO_TOKEN_SECS,
            toolsets: None,
        };
        let (record, secret) = credentials.create_token(new).await?;
        let scheme = if config.tls.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{local}/mcp");
        let snippet = crate::clients::claude_desktop(&url, &secret);
        println!(
            "toolgate: first start: created {} and the principal `admin` ({FIRST_START_ROLE}).",
            config.database.describe()
        );
        println!(
            "Demo token {} ({tier} tier, expires in {} days), shown only this once:\n\n    {secret}\n",
            record.id,
            DEMO_TOKEN_SECS / 86_400
        );
        println!("Claude Desktop (claude_desktop_config.json):\n{}\n", serde_json::to_string_pretty(&snippet)?);
        println!("Claude Code:\n    {}\n", crate::clients::claude_code(&url, &secret));
        println!("Other clients (VS Code, Cursor, the Inspector, cloud connectors): docs/clients.md");
        let me = crate::clients::this_command();
        println!("More tokens: {me} token create --principal admin --tier readonly {}", config.database.flag());
        if me != "toolgate" {
            println!("(`cargo install --path .` puts `toolgate` on your PATH; until then it is {me})");
        }
    }
    Ok(repositories)
}

pub async fn serve(config: Config) -> Result<()> {
    crate::metrics::install();
    let clock = Clock::default();
    let served = config.tls.clone().map(ServedCertificate::load).transpose().map_err(anyhow::Error::msg)?;
    let acceptor = served.as_ref().map(|s| s.acceptor()).transpose().map_err(anyhow::Error::msg)?;
    let scheme = if served.is_some() { "https" } else { "http" };
    // The agent listener may have a pair of its own; agents elsewhere use the main one's.
    let agent_served = match &config.agent_tls {
        Some(files) => Some(ServedCertificate::load(files.clone()).map_err(anyhow::Error::msg)?),
        None => served.clone(),
    };
    let agent_scheme = if agent_served.is_some() { "https" } else { "http" };
    // Tests move the server's clock (e.g. to expire approvals across a restart).
    if let Some(offset) = std::env::var("TOOLGATE_TEST_CLOCK_OFFSET_MS").ok().and_then(|v| v.parse().ok()) {
        clock.advance_ms(offset);
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let local = listener.local_addr()?;
    let agent_listener = match config.agent_listen {
        Some(address) => Some(
            tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| format!("cannot listen for agents on {address}"))?,
        ),
        None => None,
    };
    let metrics_listener = match config.metrics_listen {
        Some(address) => Some(
            tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| format!("cannot listen for metrics on {address}"))?,
        ),
        None => None,
    };
    let agents_at = match &agent_listener {
        Some(l) => l.local_addr()?,
        None => local,
    };
    let repositories = bootstrap(&config, local, &clock).await?;
    let vault = crate::sealing::vault::Vault::open(config.kek.clone(), repositories.secrets.clone(), clock.now_secs())
        .await
        .context("cannot open the plugin secrets")?;
    let vault = Arc::new(vault);
    match vault.status().await {
        Ok(status) => match status.active_version {
            Some(v) => println!("toolgate: plugin secrets sealed under KEK version {v}"),
            None => {
                println!("toolgate: no key-encryption key (--kek-file, TOOLGATE_KEK): the secret tools are refused")
            }
        },
        Err(e) => tracing::warn!("cannot read the KEK status: {e}"),
    }
    let (audit, writer) = AuditWriter::start(repositories.audit.clone());
    let trust =
        crate::trust::start(&vault, clock.now_ms()).await.context("cannot make or read the agent CA")?.map(Arc::new);
    let agent_ca = trust.as_ref().map(|t| t.ca.clone());
    let mut hub = Hub::load(repositories.fleet.clone(), repositories.work.clone(), clock.clone(), config.fleet)
        .await
        .context("cannot load the agents")?
        .declaring(crate::instructions::instructions())
        .with_audit(Arc::new(audit.clone()))
        .with_plugin_config(repositories.plugin_config.clone())
        .with_experience(repositories.experience.clone(), crate::registry::SIGNALS.signals.clone())
        .with_secrets(toolgate_fleet::SecretDelivery { source: vault.clone() })
        .with_uploads(toolgate_fleet::UploadDesk::new(
            repositories.uploads.clone(),
            clock.clone(),
            Arc::new(audit.clone()),
        ));
    if let Some(trust) = &trust {
        hub = hub.with_signing(trust.signer.clone(), Arc::new(audit.clone()));
    }
    if let Some(ca) = &agent_ca {
        hub = hub.with_certificates(
            Arc::new(crate::trust::issuer::Issuing {
                ca: ca.clone(),
                certs: repositories.certs.clone(),
                clock: clock.clone(),
                audit: Arc::new(audit.clone()),
                lifetime_secs: config.agent_cert_lifetime_secs,
            }),
            repositories.certs.clone(),
        );
    }
    // Other replicas share the database: say where our agents are, follow what they change.
    let feed = repositories.shared.as_ref().map(|s| s.changes.clone());
    if let Some(shared) = &repositories.shared {
        hub = hub.shared_as(&config.replica, shared.state.clone());
        println!("toolgate: replica {} of a shared database", config.replica);
    }
    let hub = Arc::new(hub);
    // Revoked serials are refused from the first handshake, after a restart too.
    hub.check_certificates(true).await.context("cannot read the revoked certificates")?;
    hub.load_kill_switches().await.context("cannot read the plugin kill switches")?;
    // The agent listener with TLS and a CA asks agents for their certificates (docs/trust.md).
    let trusted: Vec<&str> = agent_ca.iter().flat_map(|ca| ca.trusted()).map(|g| g.cert_pem.as_str()).collect();
    let agent_tls = super::tls::agent_listener_tls(agent_served.as_ref(), &trusted).map_err(anyhow::Error::msg)?;
    let rules = config.compliance.load().map_err(anyhow::Error::msg)?;
    println!("toolgate: {} compliance rule(s) from {}", rules.rules.len(), rules.source);
    hub.set_rules(rules);
    let mut services = Services::new(repositories, clock, audit, hub.clone())
        .with_vault(vault)
        .with_upload_limits(config.uploads.clone())
        .with_answer_page_bytes(config.answers.page_bytes);
    if let Some(trust) = trust {
        services = services.with_trust(trust);
    }
    let services = Arc::new(services);
    let options = Options {
        list_all_tools: config.list_all_tools,
        read_only: config.read_only,
        sessions: config.sessions,
        streams: config.streams,
        answers: config.answers,
    };
    let mut mcp = McpServer::new(services.clone(), options)?;
    mcp = match services.repositories().shared.clone() {
        // Replicas: one key for all (a round issued by one is answered on another), made by
        // the first to start; sessions and request-state marks in the database.
        Some(shared) => {
            let fresh = toolgate_domain::secrets::random_bytes::<32>();
            let key = shared.state.shared_secret(REQUEST_STATE_KEY_FILE, &fresh).await?;
            mcp.with_request_state_key(key).with_shared_state(shared.state, shared.replica)
        }
        None => mcp.with_request_state_key(request_state_key(&config.data_dir)?),
    };
    // The agent listener's bound address (its port may have been chosen by the system): the
    // MCP listener tells agents that come to it where to go.
    let mut config = config;
    config.agent_listen = agent_listener.as_ref().map(|_| agents_at);
    let state = Arc::new(AppState::new(config, mcp).context("cannot start the agents' threads")?);
    if let (Some(deployment), Some(oauth)) = (&state.config.deployment, &state.oauth) {
        crate::deployment::check_groups(&deployment.file, &*services.repositories().groups)
            .await
            .map_err(anyhow::Error::msg)?;
        let issuers: Vec<&str> = oauth.issuers.iter().map(|i| i.settings.issuer.as_str()).collect();
        println!("toolgate: access tokens from {} accepted for {}", issuers.join(", "), oauth.resource);
    }
    let stop_upkeep = CancellationToken::new();
    let upkeep = tokio::spawn(
        Upkeep {
            failures: state.auth_failures.clone(),
            audit: services.audit().clone(),
            audit_log: services.repositories().audit.clone(),
            credentials: services.repositories().credentials.clone(),
            uploads: services.repositories().uploads.clone(),
            experience: services.repositories().experience.clone(),
            experience_retention: state.config.fleet.experience_retention,
            clock: services.clock().clone(),
            retention_ms: state.config.audit_retention_ms,
        }
        .run(stop_upkeep.clone()),
    );
    let sweeper = tokio::spawn(super::upkeep::sweep_agents(hub.clone(), stop_upkeep.clone()));
    // Below the calls' priority, as the reports it follows (agent_work.rs).
    let views = state.agent_work.spawn(super::upkeep::refresh_experience_views(hub.clone(), stop_upkeep.clone()));
    let follower = feed.map(|feed| {
        let answers = tokio::spawn(state.mcp.clone().follow_replicas(feed.clone(), stop_upkeep.clone()));
        (tokio::spawn(hub.clone().follow(feed, stop_upkeep.clone())), answers)
    });
    let resource_updates = tokio::spawn(state.mcp.clone().forward_resource_updates(stop_upkeep.clone()));
    let tls_reloader = served.clone().map(|s| tokio::spawn(super::tls::reload_on_hangup(s, stop_upkeep.clone())));
    let agent_tls_reloader = state
        .config
        .agent_tls
        .as_ref()
        .and(agent_served.clone())
        .map(|s| tokio::spawn(super::tls::reload_on_hangup(s, stop_upkeep.clone())));
    let reloader = tokio::spawn(crate::compliance::reload_on_hangup(
        hub.clone(),
        state.config.compliance.clone(),
        stop_upkeep.clone(),
    ));
    let local_agent = match state.config.local_agent {
        true => Some(
            super::local_agent::start(
                &hub,
                &state.config.data_dir,
                agents_at,
                agent_served.clone(),
                stop_upkeep.clone(),
            )
            .await?,
        ),
        false => None,
    };
    drop(services);
    // Installed before the address is announced: a SIGTERM right after it must still drain.
    let terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot install the SIGTERM handler")?;
    // Agents on a listener of their own have caps of their own, from the first byte: idle
    // sockets on the MCP port cannot keep them out, nor they MCP clients.
    let stop_agents = CancellationToken::new();
    let mutual = agent_tls.as_ref().is_some_and(|t| t.client_certificates);
    let agent_surface = agent_listener.map(|l| {
        let limits = ConnectionLimits {
            header_read: std::time::Duration::from_secs(10),
            body_read: std::time::Duration::from_secs(10),
            max_unauthenticated: state.config.fleet.max_handshakes,
            // Agents behind one NAT share an address; their handshakes have a cap of their own.
            max_unauthenticated_per_address: state.config.fleet.max_handshakes,
            reserved: 0,
        };
        let stop = stop_agents.clone();
        tokio::spawn(super::listener::serve(l, agent_router(state.clone()), None, limits, agent_tls, async move {
            stop.cancelled().await
        }))
    });
    let metrics_at = metrics_listener.as_ref().map(|l| l.local_addr()).transpose()?;
    let metrics_surface = metrics_listener.map(|l| {
        let address = metrics_at.map(|a| a.to_string()).unwrap_or_default();
        println!("toolgate: metrics at {scheme}://{address}/metrics");
        let stop = stop_agents.clone();
        tokio::spawn(super::listener::serve(
            l,
            super::metrics_router(state.clone()),
            None,
            state.config.connections,
            acceptor.clone().map(super::listener::ListenerTls::server),
            async move { stop.cancelled().await },
        ))
    });
    if served.is_none() {
        warn_plain_http(&[Some(local), metrics_at]);
    }
    if agent_served.is_none() {
        warn_plain_http(&[Some(agents_at)]);
    }
    println!("toolgate: agents connect to {agent_scheme}://{agents_at}");
    if mutual {
        println!("toolgate: agents present client certificates of the agent CA there (mutual TLS)");
    }
    println!("toolgate: serving MCP on {scheme}://{local}/mcp ({} tools)", ToolId::ALL.len());
    let limits = state.config.connections;
    let mcp = state.mcp.clone();
    let stopping = async move {
        shutdown_signal(terminate).await;
        // Streamed answers end now (their executions go on) rather than hold the exit.
        mcp.begin_shutdown();
    };
    let tls = acceptor.map(super::listener::ListenerTls::server);
    let served = super::listener::serve(listener, router(state.clone()), Some(state), limits, tls, stopping).await;
    stop_agents.cancel();
    // Sessions are upgraded connections the listeners no longer track: closed here, or their
    // tasks would hold the hub (and the audit writer) past the drain below.
    hub.close_all();
    for surface in [agent_surface, metrics_surface].into_iter().flatten() {
        let _ = surface.await;
    }
    // The upkeep writes its last summaries and lets go of the audit writer.
    stop_upkeep.cancel();
    let _ = upkeep.await;
    let _ = sweeper.await;
    let _ = views.await;
    if let Some((fleet, answers)) = follower {
        let _ = fleet.await;
        let _ = answers.await;
    }
    let _ = resource_updates.await;
    let _ = reloader.await;
    for reloader in [tls_reloader, agent_tls_reloader].into_iter().flatten() {
        let _ = reloader.await;
    }
    if let Some(agent) = local_agent {
        let _ = agent.await;
    }
    drop(hub);
    // Every connection has finished and dropped its state: the writer drains and ends.
    if tokio::time::timeout(std::time::Duration::from_secs(30), writer).await.is_err() {
        tracing::error!("the audit writer did not drain within 30 s");
    }
    served?;
    println!("toolgate: stopped");
    Ok(())
}

/// Plain HTTP beyond this machine carries bearer tokens and agent credentials in clear.
fn warn_plain_http(bound: &[Option<SocketAddr>]) {
    let mut outside: Vec<SocketAddr> = bound.iter().flatten().filter(|a| !a.ip().is_loopback()).copied().collect();
    outside.dedup();
    for address in outside {
        let warning = format!(
            "{address} serves plain HTTP beyond this machine: tokens and agent credentials cross the network in clear; \
             serve HTTPS (--tls-cert, --tls-key) or put a TLS-terminating proxy in front"
        );
        tracing::warn!("{warning}");
    }
}

async fn shutdown_signal(mut terminate: tokio::signal::unix::Signal) {
    tokio::select! { _ = tokio::signal::ctrl_c() => {}, _ = terminate.recv() => {} }
}

/// Where the HMAC key of 2026-07-28 request states is kept: made on first start, so a round
/// issued before a restart is still answerable after it.
const REQUEST_STATE_KEY_FILE: &str = "request-state.key";

fn request_state_key(data_dir: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    let path = data_dir.join(REQUEST_STATE_KEY_FILE);
    match std::fs::read(&path) {
        Ok(key) if key.len() >= 32 => Ok(key),
        Ok(_) => anyhow::bail!(
            "{} holds fewer than 32 bytes: delete it and start again (a new key is made; open input_required rounds are then asked afresh)",
            path.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = toolgate_domain::secrets::random_bytes::<32>().to_vec();
            toolgate_agent::state::write_durably(data_dir, REQUEST_STATE_KEY_FILE, &key)
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok(key)
        }
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

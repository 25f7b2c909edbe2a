//! `toolgate serve`: MCP over Streamable HTTP (axum), both protocol eras on one endpoint.

pub mod api;
pub mod call;
pub mod http;
pub mod jsonrpc;
pub mod protocol;
pub mod sessions;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};

use crate::clock::Clock;
use crate::registry::{DEMO_TOKEN_TIER, FIRST_START_ROLE, TIER_COUNT, TOOLS_LIST_ALL, TOOLS_LIST_BY_TIER, Tier, ToolId};
use crate::store::Store;

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
pub const MAX_BODY_BYTES: u64 = 4 * 1024 * 1024;

#[derive(Clone, Debug)]
pub struct Config {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    /// Origins allowed besides the loopback ones.
    pub allowed_origins: Vec<String>,
    /// Serve the whole catalogue to every tier (the gate still refuses at call time).
    pub list_all_tools: bool,
    /// Refuse every tool that is not read-class, for every tier.
    pub read_only: bool,
    /// Answer every MCP request with -32005.
    pub mcp_disable: bool,
}

/// The tools/list results of one tier, for each era, computed once at start.
pub struct ListResults {
    pub handshake: String,
    pub stateless: String,
}

pub struct AppState {
    pub config: Config,
    pub store: Store,
    pub clock: Clock,
    pub sessions: sessions::Sessions,
    /// One compiled inputSchema validator per tool, in ToolId order, and the parsed schema.
    pub validators: Vec<jsonschema::Validator>,
    pub input_schemas: Vec<serde_json::Value>,
    pub output_validators: Vec<Option<jsonschema::Validator>>,
    /// Per tool, the client capabilities a call needs.
    pub required_capabilities: Vec<Option<serde_json::Value>>,
    pub audit: crate::audit::Audit,
    /// Per tier (in Tier order), then one for a tier policy.yaml does not know (empty).
    pub lists: Vec<ListResults>,
    pub server_info: serde_json::Value,
    sequence: AtomicU64,
}

impl AppState {
    pub fn new(config: Config, store: Store, clock: Clock, audit: crate::audit::Audit) -> Result<Self> {
        let compile = |schema: &str, what: &str, name: &str| {
            let value: serde_json::Value = serde_json::from_str(schema).with_context(|| format!("{what} of {name}"))?;
            jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .should_validate_formats(true)
                .build(&value)
                .map_err(|e| anyhow::anyhow!("{what} of {name} does not compile: {e}"))
        };
        let mut validators = Vec::new();
        let mut output_validators = Vec::new();
        let mut input_schemas = Vec::new();
        let mut required_capabilities = Vec::new();
        for id in ToolId::ALL {
            let meta = id.meta();
            required_capabilities.push(meta.required_client_capabilities.map(serde_json::from_str).transpose()?);
            input_schemas.push(serde_json::from_str(meta.input_schema)?);
            validators.push(compile(meta.input_schema, "inputSchema", meta.name)?);
            output_validators.push(meta.output_schema.map(|s| compile(s, "outputSchema", meta.name)).transpose()?);
        }
        let server_info =
            serde_json::json!({"name": "toolgate", "title": "toolgate", "version": env!("CARGO_PKG_VERSION")});
        let meta = serde_json::json!({"io.modelcontextprotocol/serverInfo": server_info});
        // Read-only mode hides what it would refuse; the refusal at call time still stands.
        let read_only_filter = |tools: &str| -> Result<String> {
            if !config.read_only {
                return Ok(tools.to_string());
            }
            let all: Vec<serde_json::Value> = serde_json::from_str(tools)?;
            let kept: Vec<_> = all.into_iter().filter(|t| t["annotations"]["readOnlyHint"] == true).collect();
            Ok(serde_json::to_string(&kept)?)
        };
        let list = |tools: String| ListResults {
            handshake: format!(r#"{{"tools":{tools}}}"#),
            stateless: format!(
                r#"{{"_meta":{meta},"cacheScope":"private","resultType":"complete","tools":{tools},"ttlMs":{LIST_TTL_MS}}}"#
            ),
        };
        let mut lists = Vec::new();
        for t in 0..=TIER_COUNT {
            let tools = match (config.list_all_tools, t < TIER_COUNT) {
                (true, _) => TOOLS_LIST_ALL,
                (false, true) => TOOLS_LIST_BY_TIER[t],
                (false, false) => "[]",
            };
            lists.push(list(read_only_filter(tools)?));
        }
        Ok(Self {
            config,
            store,
            clock,
            sessions: sessions::Sessions::default(),
            validators,
            input_schemas,
            output_validators,
            required_capabilities,
            audit,
            lists,
            server_info,
            sequence: AtomicU64::new(0),
        })
    }

    pub fn list_for(&self, tier: Option<Tier>) -> &ListResults {
        &self.lists[tier.map_or(TIER_COUNT, Tier::index)]
    }

    /// `req-<hex ms>-<hex seq>`: unique per server run, shown to clients and written to audit.
    pub fn correlation_id(&self) -> String {
        let seq = self.sequence.fetch_add(1, Ordering::Relaxed);
        format!("req-{:x}-{:x}", self.clock.now_ms(), seq)
    }
}

/// Opens the store; on an empty one, creates `admin` and prints a demo token once.
pub fn bootstrap(config: &Config, local: SocketAddr, clock: &Clock) -> Result<Store> {
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("cannot create data dir {}", config.data_dir.display()))?;
    let path = config.data_dir.join("toolgate.sqlite3");
    let store = Store::open(&path).with_context(|| format!("cannot open the store {}", path.display()))?;
    if store.principal_count()? == 0 {
        let now = clock.now_secs();
        store.put_principal("admin", &[FIRST_START_ROLE.to_string()], now)?;
        let expires = now + 30 * 24 * 3600;
        let (record, secret) = store.create_token("admin", Some(DEMO_TOKEN_TIER.name()), "demo", now, expires)?;
        let url = format!("http://{local}/mcp");
        let snippet = serde_json::json!({"mcpServers": {"toolgate": {
            "command": "npx",
            "args": ["-y", "mcp-remote", url, "--header", format!("Authorization: Bearer {secret}")]
        }}});
        println!("toolgate: first start: created {} and the principal `admin` ({FIRST_START_ROLE}).", path.display());
        println!(
            "Demo token {} ({} tier, expires in 30 days), shown only this once:\n\n    {secret}\n",
            record.id,
            DEMO_TOKEN_TIER.name()
        );
        println!("Claude Desktop (claude_desktop_config.json):\n{}\n", serde_json::to_string_pretty(&snippet)?);
        println!(
            "More tokens: toolgate token create --principal admin --tier readonly --data-dir {}",
            config.data_dir.display()
        );
    }
    Ok(store)
}

pub async fn serve(config: Config) -> Result<()> {
    let clock = Clock::default();
    // Tests move the server's clock (e.g. to expire approvals across a restart).
    if let Some(offset) = std::env::var("TOOLGATE_TEST_CLOCK_OFFSET_MS").ok().and_then(|v| v.parse().ok()) {
        clock.advance_ms(offset);
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let local = listener.local_addr()?;
    let store = bootstrap(&config, local, &clock)?;
    let (audit, writer) = crate::audit::Audit::start(store.clone());
    let state = Arc::new(AppState::new(config, store, clock, audit)?);
    // Installed before the address is announced: a SIGTERM right after it must still drain.
    let terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot install the SIGTERM handler")?;
    println!("toolgate: serving MCP on http://{local}/mcp ({} tools)", ToolId::ALL.len());
    let served = axum::serve(listener, http::router(state)).with_graceful_shutdown(shutdown_signal(terminate)).await;
    // Every connection has finished and dropped its state: the writer drains and ends.
    if tokio::time::timeout(std::time::Duration::from_secs(30), writer).await.is_err() {
        tracing::error!("the audit writer did not drain within 30 s");
    }
    served?;
    println!("toolgate: stopped");
    Ok(())
}

async fn shutdown_signal(mut terminate: tokio::signal::unix::Signal) {
    tokio::select! { _ = tokio::signal::ctrl_c() => {}, _ = terminate.recv() => {} }
}

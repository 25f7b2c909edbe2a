//! In-process router tests (axum `oneshot`: no sockets, no processes) over a real SQLite
//! store that each test breaks on purpose, one area at a time, so that every store-fault
//! path answers as designed: 503 with Retry-After at the HTTP edge and on the approval API,
//! -32603 with `retry_after_ms` and a remediation inside MCP, and nothing that pretends.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};
use toolgate::http::{AppState, Config, ConsoleSession, router};
use toolgate::mcp::{McpServer, Options};
use toolgate::services::Services;
use toolgate_domain::Clock;
use toolgate_domain::tokens::NewToken;
use toolgate_fleet::{FleetSettings, Hub};
use toolgate_store::sqlite::Area;
use toolgate_store::{AuditWriter, SqliteStore};
use tower::ServiceExt;

struct App {
    router: Router,
    store: SqliteStore,
    /// alice, Operator role, operator tier.
    operator: String,
    /// admin, Administrator role, an API credential (no MCP tier).
    reviewer: String,
    /// An agent enrolled through the hub (tags act only on known agents).
    agent: String,
    state: Arc<AppState>,
}

/// Written where a call names the agent; [`App::call`] puts the enrolled agent's id there
/// (the id is random, and the cases are tables written before the app exists).
const AGENT: &str = "<enrolled agent>";

async fn app() -> App {
    app_caching_credentials(None).await
}

/// With `Some(ttl)`, authentication goes through the server's credential cache: a call made
/// after the credentials store broke still gets past the edge, to the handler's own fault.
async fn app_caching_credentials(ttl_ms: Option<i64>) -> App {
    let store = SqliteStore::open_in_memory().unwrap();
    let repositories = match ttl_ms {
        Some(ttl_ms) => store.repositories().with_auth_cache(Clock::default(), ttl_ms),
        None => store.repositories(),
    };
    let credentials = &repositories.credentials;
    let now = Clock::default().now_secs();
    credentials.put_principal("admin", &["Administrator".into()], now).await.unwrap();
    credentials.put_principal("alice", &["Operator".into()], now).await.unwrap();
    let token = |principal, tier| NewToken { principal, tier, name: "t", now, expires_at: now + 3600, toolsets: None };
    let (_, operator) = credentials.create_token(token("alice", Some("operator"))).await.unwrap();
    let (_, reviewer) = credentials.create_token(token("admin", None)).await.unwrap();
    let (audit, _writer) = AuditWriter::start(repositories.audit.clone());
    let hub =
        Hub::load(repositories.fleet.clone(), repositories.work.clone(), Clock::default(), FleetSettings::default())
            .await
            .unwrap();
    let now = Clock::default().now_ms();
    let (_, enrollment) = repositories.fleet.create_enrollment_token(now + 60_000, 1, now).await.unwrap();
    let (agent, _) = hub.enroll(&enrollment).await.unwrap().unwrap();
    let services = Arc::new(Services::new(repositories, Clock::default(), audit, Arc::new(hub)));
    let config = Config {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        data_dir: "unused".into(),
        database: toolgate::database::Database::Sqlite { file: "unused".into() },
        replica: "test".into(),
        allowed_origins: Vec::new(),
        list_all_tools: false,
        read_only: false,
        mcp_disable: false,
        sessions: Default::default(),
        streams: Default::default(),
        answers: Default::default(),
        auth_failure_window_ms: 60_000,
        audit_retention_ms: 365 * 86_400_000,
        connections: Default::default(),
        auth_cache_ttl_ms: 1000,
        fleet: FleetSettings::default(),
        agent_nice: 10,
        local_agent: false,
        compliance: toolgate::compliance::RuleSource::new(None, std::path::Path::new("unused")),
        deployment: None,
        uploads: toolgate::deployment::upload_limits(None, &toolgate::registry::CATALOGUE).unwrap(),
        agent_cert_lifetime_secs: 86_400,
        kek: toolgate::sealing::vault::KeySource::Absent,
        agent_listen: None,
        metrics_listen: None,
        tls: None,
        agent_tls: None,
        console_idle_ms: 900_000,
        console_step_up_ms: 300_000,
    };
    let mcp = McpServer::new(services, Options::default()).unwrap();
    let state = Arc::new(AppState::new(config, mcp).unwrap());
    App { router: router(state.clone()), store, operator, reviewer, agent, state }
}

struct Answer {
    status: StatusCode,
    retry_after: Option<String>,
    body: Value,
}

impl App {
    async fn send(&self, method: &str, path: &str, token: &str, body: Option<Value>) -> Answer {
        let bearer = format!("Bearer {token}");
        self.send_with(method, path, &[(header::AUTHORIZATION, bearer.as_str())], body).await
    }

    async fn send_with(
        &self,
        method: &str,
        path: &str,
        headers: &[(header::HeaderName, &str)],
        body: Option<Value>,
    ) -> Answer {
        let bytes = body.map(|b| b.to_string()).unwrap_or_default();
        let mut request = Request::builder().method(method).uri(path);
        for (name, value) in headers {
            request = request.header(name, *value);
        }
        let request = request
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CONTENT_LENGTH, bytes.len())
            .header("MCP-Protocol-Version", "2025-06-18")
            .body(Body::from(bytes))
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let retry_after = response.headers().get(header::RETRY_AFTER).map(|v| v.to_str().unwrap().to_string());
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        Answer { status, retry_after, body: serde_json::from_slice(&bytes).unwrap_or(Value::Null) }
    }

    async fn call(&self, tool: &str, mut arguments: Value) -> Answer {
        if arguments["agent_id"] == AGENT {
            arguments["agent_id"] = json!(self.agent);
        }
        if arguments["agent_ids"] == json!([AGENT]) {
            arguments["agent_ids"] = json!([self.agent]);
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
        self.send("POST", "/mcp", &self.operator, Some(body)).await
    }
}

/// -32603 with the A4 data: the correlation id, when to retry (the seeds' 5 s), what to do.
fn assert_internal_with_retry(answer: &Answer, what: &str) {
    assert_internal_retrying_after(answer, what, 5000);
}

/// The seeds price the plugin-config and token-rotation families' store faults at 2 s.
fn assert_internal_retrying_after(answer: &Answer, what: &str, retry_after_ms: u64) {
    assert_eq!(answer.status, StatusCode::OK, "{what}: {:?}", answer.body);
    let error = &answer.body["error"];
    assert_eq!(error["code"], -32603, "{what}: {}", answer.body);
    assert_eq!(error["data"]["retry_after_ms"], retry_after_ms, "{what}: {}", answer.body);
    assert!(error["data"]["correlation_id"].as_str().is_some_and(|c| c.starts_with("req-")), "{what}");
    assert!(error["data"]["remediation"].as_str().is_some_and(|r| r.contains("retry")), "{what}");
}

fn assert_store_unavailable(answer: &Answer, what: &str) {
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{what}: {:?}", answer.body);
    assert_eq!(answer.body["error"], "store_unavailable", "{what}");
    assert_eq!(answer.retry_after.as_deref(), Some("5"), "{what}");
}

#[tokio::test]
async fn a_stopping_server_refuses_new_sessions_with_503_and_32015() {
    let app = app().await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let before = app.send("POST", "/mcp", &app.operator, Some(initialize.clone())).await;
    assert_eq!(before.status, StatusCode::OK, "{}", before.body);
    app.state.mcp.begin_shutdown();
    let during = app.send("POST", "/mcp", &app.operator, Some(initialize)).await;
    assert_eq!(during.status, StatusCode::SERVICE_UNAVAILABLE, "{}", during.body);
    assert_eq!(during.body["error"]["code"], -32015);
    assert!(during.body["error"]["data"]["remediation"].as_str().unwrap().contains("stopping"));
    let call = app.call("get_tags", json!({"agent_id": AGENT})).await;
    assert_eq!(call.body["result"]["isError"], false, "calls already underway are still answered: {}", call.body);
}

#[tokio::test]
async fn the_store_working_is_the_baseline() {
    let app = app().await;
    let answer = app.call("get_tags", json!({"agent_id": AGENT})).await;
    assert_eq!(answer.body["result"]["isError"], false, "{}", answer.body);
    let approvals = app.send("GET", "/api/v1/approvals", &app.reviewer, None).await;
    assert_eq!(approvals.status, StatusCode::OK);
}

#[tokio::test]
async fn credentials_fault_is_503_before_anything_runs() {
    let app = app().await;
    app.store.break_area(Area::Credentials).await.unwrap();
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    assert_store_unavailable(&app.send("POST", "/mcp", &app.operator, Some(ping)).await, "MCP authentication");
    assert_store_unavailable(&app.send("GET", "/api/v1/approvals", &app.reviewer, None).await, "API authentication");
}

#[tokio::test]
async fn approvals_fault_in_the_gate_and_on_the_api() {
    let app = app().await;
    app.store.break_area(Area::Approvals).await.unwrap();
    // delete_tag needs a human's approval at the operator tier: minting fails.
    let answer = app.call("delete_tag", json!({"agent_id": AGENT, "key": "env"})).await;
    assert_internal_with_retry(&answer, "minting a ticket");
    assert!(answer.body["error"]["message"].as_str().unwrap().contains("approval store failed"), "{}", answer.body);
    let recall = app.call("delete_tag", json!({"agent_id": AGENT, "key": "env", "approval_id": "0".repeat(32)})).await;
    assert_internal_with_retry(&recall, "recalling a ticket");
    assert_store_unavailable(&app.send("GET", "/api/v1/approvals", &app.reviewer, None).await, "listing");
    assert_store_unavailable(&app.send("GET", "/api/v1/approvals/x", &app.reviewer, None).await, "showing");
    // Deciding takes a console session (a bearer token never decides).
    let bearer = app.send("POST", "/api/v1/approvals/x/approve", &app.reviewer, Some(json!({}))).await;
    assert_eq!(
        (bearer.status, bearer.body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("console_session_required"))
    );
    let now = Clock::default().now_ms();
    let session = ConsoleSession {
        principal: "admin".into(),
        csrf: "csrf-token".into(),
        last_seen_ms: now,
        proof_ms: Some(now),
        assurance: "test".into(),
        idp: None,
        step_up_ms: 0,
    };
    let cookie = format!("toolgate_console={}", app.state.console.open(session));
    let headers = [(header::COOKIE, cookie.as_str()), (header::HeaderName::from_static("x-csrf-token"), "csrf-token")];
    let approve = app.send_with("POST", "/api/v1/approvals/x/approve", &headers, Some(json!({}))).await;
    assert_store_unavailable(&approve, "deciding");
    let listed = app.call("list_pending_approvals", json!({})).await;
    assert_internal_with_retry(&listed, "list_pending_approvals");
}

#[tokio::test]
async fn each_handler_area_fault_is_an_internal_error_with_retry() {
    for (area, tool, arguments) in [
        (Area::Tags, "get_tags", json!({"agent_id": AGENT})),
        (Area::Tags, "set_tag", json!({"agent_id": AGENT, "key": "env", "value": "prod"})),
        (Area::Tags, "search_agents_by_tag", json!({"key": "env"})),
        (Area::Tags, "preview_scope_targets", json!({"expression": "status = online"})),
        (Area::Fleet, "list_inventory_tables", json!({})),
        (Area::Fleet, "get_agent_inventory", json!({"agent_id": AGENT, "table": "users"})),
        (Area::Fleet, "query_inventory", json!({"table": "users"})),
        (Area::Fleet, "get_agent_details", json!({"agent_id": AGENT})),
        (Area::Work, "execute_instruction", json!({"definition": "os_facts", "agent_ids": [AGENT]})),
        (Area::Work, "list_executions", json!({})),
        (Area::Work, "get_execution_status", json!({"execution_id": "exe-00"})),
        (Area::Work, "query_responses", json!({"execution_id": "exe-00"})),
        (Area::Work, "cancel_execution", json!({"execution_id": "exe-00"})),
        (Area::Work, "get_fleet_compliance", json!({})),
        (Area::Groups, "list_management_groups", json!({})),
        (Area::Audit, "query_audit_log", json!({})),
    ] {
        let app = app().await;
        app.store.break_area(area).await.unwrap();
        let answer = app.call(tool, arguments).await;
        assert_internal_with_retry(&answer, tool);
        assert!(answer.body["error"]["message"].as_str().unwrap().starts_with(&format!("{tool} failed")), "{tool}");
    }
}

/// The seeds' shorter floor: a store fault in the plugin-config family answers 2,000 ms
/// (its REST twin's `Retry-After: 2`), declared in policy.yaml `store_fault_retry`.
#[tokio::test]
async fn plugin_config_faults_retry_after_two_seconds() {
    for (tool, arguments) in [
        ("list_plugin_config", json!({})),
        ("get_plugin_config", json!({"plugin": "p", "key": "k"})),
        ("get_plugin_kill_switch", json!({"plugin": "workspace"})),
    ] {
        let app = app().await;
        app.store.break_area(Area::PluginConfig).await.unwrap();
        assert_internal_retrying_after(&app.call(tool, arguments).await, tool, 2000);
    }
}

/// The token-rotation family too: a rotation whose store fails after the caller was
/// authenticated (the credential cache holds it) says 2,000 ms.
#[tokio::test]
async fn token_rotation_faults_retry_after_two_seconds() {
    let app = app_caching_credentials(Some(600_000)).await;
    let listed = app.call("list_api_tokens", json!({})).await;
    let token_id = listed.body["result"]["structuredContent"]["tokens"][0]["token_id"].as_str().unwrap().to_string();
    app.store.break_area(Area::Credentials).await.unwrap();
    // A read of the same store outside the family keeps the general 5 s.
    assert_internal_with_retry(&app.call("list_api_tokens", json!({})).await, "list_api_tokens");
    for (tool, arguments) in [
        ("rotate_api_token", json!({"token_id": token_id})),
        ("confirm_api_token_rotation", json!({"token_id": token_id, "secret": "tg_x"})),
    ] {
        assert_internal_retrying_after(&app.call(tool, arguments).await, tool, 2000);
    }
}

#[tokio::test]
async fn audit_fault_does_not_fail_the_call_and_the_api_says_so() {
    let app = app().await;
    app.store.break_area(Area::Audit).await.unwrap();
    // The call's answer does not wait on its audit row (the writer retries, then logs it).
    let answer = app.call("get_tags", json!({"agent_id": AGENT})).await;
    assert_eq!(answer.body["result"]["isError"], false, "{}", answer.body);
    assert_store_unavailable(&app.send("GET", "/api/v1/audit", &app.reviewer, None).await, "reading the audit log");
}

#[tokio::test]
async fn the_console_reports_a_broken_store_plainly() {
    let app = app().await;
    app.store.break_area(Area::Approvals).await.unwrap();
    let repositories = app.store.repositories();
    let refused = toolgate::cli::console::approvals_decide(&repositories, "x", "admin", true, None).await;
    let message = format!("{:#}", refused.unwrap_err());
    assert!(message.contains("the store failed"), "{message}");
}

/// revoke_certificate's own audit row tells a store fault (failure) from an unknown serial
/// (denied): an outage is never recorded as a refused revoke (docs/trust.md).
#[tokio::test]
async fn a_certs_fault_on_revoke_is_audited_as_a_failure_not_a_denial() {
    let app = app().await;
    let repositories = app.store.repositories();
    let now = Clock::default().now_secs();
    let credentials = &repositories.credentials;
    credentials.put_principal("rita", &["Administrator".into()], now).await.unwrap();
    let new = NewToken {
        principal: "admin",
        tier: Some("supervised"),
        name: "s",
        now,
        expires_at: now + 3600,
        toolsets: None,
    };
    let (_, supervised) = credentials.create_token(new).await.unwrap();
    let call = |arguments: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "revoke_certificate", "arguments": arguments}});
        let supervised = supervised.clone();
        let app = &app;
        async move { app.send("POST", "/mcp", &supervised, Some(body)).await }
    };
    // rita approves admin's ticket on a console session of her own.
    let session = ConsoleSession {
        principal: "rita".into(),
        csrf: "csrf-token".into(),
        last_seen_ms: Clock::default().now_ms(),
        proof_ms: Some(Clock::default().now_ms()),
        assurance: "test".into(),
        idp: None,
        step_up_ms: 0,
    };
    let cookie = format!("toolgate_console={}", app.state.console.open(session));
    let headers = [(header::COOKIE, cookie.as_str()), (header::HeaderName::from_static("x-csrf-token"), "csrf-token")];
    let mut outcomes = Vec::new();
    for (serial, broken) in [("abcdef", false), ("abcdee", true)] {
        let ticket = call(json!({"serial_hex": serial})).await;
        let id = ticket.body["error"]["data"]["approval_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{}", ticket.body))
            .to_string();
        let approved =
            app.send_with("POST", &format!("/api/v1/approvals/{id}/approve"), &headers, Some(json!({}))).await;
        assert_eq!(approved.status, StatusCode::OK, "{}", approved.body);
        if broken {
            app.store.break_area(Area::Certs).await.unwrap();
        }
        let answer = call(json!({"serial_hex": serial, "approval_id": id})).await;
        match broken {
            true => assert_internal_with_retry(&answer, "revoke_certificate"),
            false => assert_eq!(answer.body["result"]["isError"], true, "{}", answer.body),
        }
        let filter = toolgate_domain::audit::AuditFilter {
            action_prefix: Some("ca.cert.revoked".into()),
            limit: 10,
            ..Default::default()
        };
        let rows = repositories.audit.query(&filter).await.unwrap();
        let row = rows.iter().find(|r| r.target.as_deref() == Some(serial)).unwrap_or_else(|| panic!("{rows:?}"));
        outcomes.push(row.result.clone());
    }
    assert_eq!(outcomes, ["denied", "failure"]);
}

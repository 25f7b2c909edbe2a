//! The starter handlers through the generated dispatch, over an in-memory store. Every
//! successful result is checked against the tool's outputSchema.

use serde_json::{Value, json};
use std::sync::Arc;

use toolgate::registry::{Tier, ToolId};
use toolgate::services::{Services, ToolContext};
use toolgate::tools::dispatch;
use toolgate_domain::groups::Reach;
use toolgate_domain::{Clock, ToolError, ToolOutput};
use toolgate_fleet::{FleetSettings, Hub};
use toolgate_store::{AuditWriter, SqliteStore};

/// An in-memory store behind the server's own services (the audit writer needs a runtime).
async fn services() -> Arc<Services> {
    let repositories = SqliteStore::open_in_memory().unwrap().repositories();
    let (audit, _writer) = AuditWriter::start(repositories.audit.clone());
    let hub =
        Hub::load(repositories.fleet.clone(), repositories.work.clone(), Clock::default(), FleetSettings::default())
            .await
            .unwrap();
    Arc::new(Services::new(repositories, Clock::default(), audit, Arc::new(hub)))
}

/// Enrolls an agent through the hub, as the agent protocol does; its id.
async fn enroll(services: &Services) -> String {
    let now = Clock::default().now_ms();
    let (_, secret) = services.fleet().store().create_enrollment_token(now + 60_000, 1, now).await.unwrap();
    services.fleet().enroll(&secret).await.unwrap().unwrap().0
}

fn ctx(services: &Arc<Services>, tier: &str, roles: &[&str]) -> ToolContext {
    ToolContext::builder(services.clone())
        .principal("alice", roles)
        .reach(Reach::Fleet)
        .tier(Tier::from_name(tier).map(Tier::rules))
        .build()
}

async fn call(ctx: &ToolContext, tool: &str, args: Value) -> Result<Value, ToolError> {
    let id = ToolId::from_name(tool).unwrap_or_else(|| panic!("{tool} is in the catalogue"));
    let meta = id.meta();
    let input: Value = serde_json::from_str(meta.input_schema).unwrap();
    assert!(jsonschema::is_valid(&input, &args), "test arguments for {tool} must be schema-valid: {args}");
    match dispatch(id, ctx, args).await? {
        ToolOutput::Structured(value) | ToolOutput::Summarized { structured: value, .. } => {
            let output: Value =
                serde_json::from_str(meta.output_schema.expect("Rust tools declare an outputSchema")).unwrap();
            let errors: Vec<String> =
                jsonschema::validator_for(&output).unwrap().iter_errors(&value).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{tool} returned {value} which breaks its outputSchema: {errors:?}");
            Ok(value)
        }
        ToolOutput::Static(raw) => Ok(serde_json::from_str(raw).unwrap()),
    }
}

#[tokio::test]
async fn plugin_config_lifecycle() {
    let store = services().await;
    let c = ctx(&store, "supervised", &["Administrator"]);
    let set = call(&c, "set_plugin_config", json!({"plugin": "sync", "key": "interval", "value": "30"})).await.unwrap();
    assert_eq!(set["created"], true);
    assert_eq!(set["previous_value"], Value::Null);
    let set = call(&c, "set_plugin_config", json!({"plugin": "sync", "key": "interval", "value": "60"})).await.unwrap();
    assert_eq!(set["previous_value"], "30");
    let got = call(&c, "get_plugin_config", json!({"plugin": "sync", "key": "interval"})).await.unwrap();
    assert_eq!(got["value"], "60");
    assert_eq!(got["updated_by"], "alice");
    call(&c, "set_plugin_config", json!({"plugin": "other", "key": "a", "value": ""})).await.unwrap();
    let all = call(&c, "list_plugin_config", json!({})).await.unwrap();
    assert_eq!(all["count"], 2);
    let one = call(&c, "list_plugin_config", json!({"plugin": "sync"})).await.unwrap();
    assert_eq!(one["entries"][0]["key"], "interval");
    let deleted = call(&c, "delete_plugin_config", json!({"plugin": "sync", "key": "interval"})).await.unwrap();
    assert_eq!(deleted["deleted_value"], "60");
    assert_eq!(deleted["changed"], true);
    // Already gone: the state asked for, so success with changed: false (issue "Hardening", 9).
    let again = call(&c, "delete_plugin_config", json!({"plugin": "sync", "key": "interval"})).await.unwrap();
    assert_eq!((again["changed"].clone(), again["deleted_value"].clone()), (json!(false), Value::Null), "{again}");
    let missing = call(&c, "get_plugin_config", json!({"plugin": "sync", "key": "interval"})).await;
    assert!(matches!(&missing, Err(ToolError::NotFound(m)) if m.contains("list_plugin_config")), "{missing:?}");
}

#[tokio::test]
async fn kill_switch() {
    let store = services().await;
    let c = ctx(&store, "supervised", &["Administrator"]);
    let before = call(&c, "get_plugin_kill_switch", json!({"plugin": "workspace"})).await.unwrap();
    assert_eq!(before["enabled"], false);
    let set =
        call(&c, "set_plugin_kill_switch", json!({"plugin": "workspace", "enabled": true, "reason": "incident 42"}))
            .await
            .unwrap();
    assert_eq!((set["enabled"].clone(), set["was_enabled"].clone()), (json!(true), json!(false)));
    let after = call(&c, "get_plugin_kill_switch", json!({"plugin": "workspace"})).await.unwrap();
    assert_eq!(after["reason"], "incident 42");
    let action =
        call(&c, "get_plugin_kill_switch", json!({"plugin": "workspace", "action": "append_line"})).await.unwrap();
    assert_eq!(action["enabled"], false, "an action's switch is its own");
    // Issue 43, 14: a switch on a plugin nothing declares stops nothing; it is refused.
    let unknown = call(&c, "set_plugin_kill_switch", json!({"plugin": "sync", "enabled": true})).await;
    assert!(matches!(&unknown, Err(ToolError::InvalidArguments(m)) if m.contains("no plugin `sync`")), "{unknown:?}");
    let action = call(&c, "get_plugin_kill_switch", json!({"plugin": "workspace", "action": "upload"})).await;
    assert!(
        matches!(&action, Err(ToolError::InvalidArguments(m)) if m.contains("has no action `upload`")),
        "{action:?}"
    );
}

#[tokio::test]
async fn discover_permissions_reflects_tier_and_roles() {
    let store = services().await;
    let viewer = call(&ctx(&store, "readonly", &["Viewer"]), "discover_permissions", json!({})).await.unwrap();
    let tools: Vec<&str> = viewer["tools"].as_array().unwrap().iter().map(|t| t["tool"].as_str().unwrap()).collect();
    assert!(tools.contains(&"get_plugin_config"));
    assert!(!tools.contains(&"delete_plugin_config"), "deny tools are not listed: {tools:?}");
    assert_eq!(viewer["tier"], "readonly");
    let admin = call(&ctx(&store, "supervised", &["Administrator"]), "discover_permissions", json!({})).await.unwrap();
    let delete = admin["tools"].as_array().unwrap().iter().find(|t| t["tool"] == "delete_plugin_config").unwrap();
    assert_eq!(delete["tier_decision"], "approval");
    assert_eq!(delete["rbac_granted"], true);
    let nobody = call(&ctx(&store, "root", &[]), "discover_permissions", json!({})).await.unwrap();
    assert_eq!(nobody["tools"], json!([]), "an unknown tier sees nothing");
    assert_eq!(nobody["tier"], Value::Null);
}

#[tokio::test]
async fn tags() {
    let store = services().await;
    let (agent, other) = (enroll(&store).await, enroll(&store).await);
    let c = ctx(&store, "operator", &["Operator"]);
    let set = call(&c, "set_tag", json!({"agent_id": agent, "key": "env", "value": "prod"})).await.unwrap();
    assert_eq!(set["previous_value"], Value::Null);
    call(&c, "set_tag", json!({"agent_id": agent, "key": "env", "value": "staging"})).await.unwrap();
    call(&c, "set_tag", json!({"agent_id": agent, "key": "owner", "value": "ops"})).await.unwrap();
    let got = call(&c, "get_tags", json!({"agent_id": agent})).await.unwrap();
    let keys: Vec<&str> = got["tags"].as_array().unwrap().iter().map(|t| t["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["env", "owner"]);
    assert_eq!(got["tags"][0]["value"], "staging");
    let deleted = call(&c, "delete_tag", json!({"agent_id": agent, "key": "env"})).await.unwrap();
    assert_eq!(deleted["deleted_value"], "staging");
    assert_eq!(deleted["changed"], true);
    let again = call(&c, "delete_tag", json!({"agent_id": agent, "key": "env"})).await.unwrap();
    assert_eq!((again["changed"].clone(), again["deleted_value"].clone()), (json!(false), Value::Null), "{again}");
    let empty = call(&c, "get_tags", json!({"agent_id": other})).await.unwrap();
    assert_eq!(empty["tags"], json!([]));
    // An id the fleet does not know is refused, naming the closest enrolled id.
    let typo = format!("{}x", &agent[..agent.len() - 1]);
    match call(&c, "set_tag", json!({"agent_id": typo, "key": "k", "value": "v"})).await {
        Err(ToolError::NotFound(message)) => {
            assert!(message.contains(&agent) && message.contains("list_agents"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

/// Fidelity: a store fault raised after an execution row exists names that execution, so a
/// client looks it up instead of calling again (which would start another). The store is
/// broken on purpose while the call follows its execution (progress asked for).
#[tokio::test]
async fn a_store_fault_after_an_execution_started_names_it() {
    use toolgate_domain::ProgressSink;
    use toolgate_store::sqlite::Area;

    let store = SqliteStore::open_in_memory().unwrap();
    let repositories = store.repositories();
    let (audit, _writer) = AuditWriter::start(repositories.audit.clone());
    let hub =
        Hub::load(repositories.fleet.clone(), repositories.work.clone(), Clock::default(), FleetSettings::default())
            .await
            .unwrap();
    let work = repositories.work.clone();
    let services = Arc::new(Services::new(repositories, Clock::default(), audit, Arc::new(hub)));
    let agent = enroll(&services).await;
    let c = ToolContext::builder(services.clone())
        .principal("alice", &["Operator"])
        .reach(Reach::Fleet)
        .tier(Tier::from_name("operator").map(Tier::rules))
        .progress(ProgressSink::new(|_| {}))
        .build();
    let running = call(&c, "execute_instruction", json!({"definition": "os_facts", "agent_ids": [agent]}));
    let breaking = async {
        // Once the execution exists, the store goes away under the call that follows it.
        let started = loop {
            if let Some(e) = work.executions(None, None, None, 0, 1).await.unwrap().first() {
                break e.execution_id.clone();
            }
            tokio::task::yield_now().await;
        };
        store.break_area(Area::Work).await.unwrap();
        started
    };
    let (answer, started) = tokio::join!(running, breaking);
    match answer {
        Err(ToolError::StoreAfterStart { execution_id, .. }) => assert_eq!(execution_id, started),
        other => panic!("expected a store fault naming {started}: {other:?}"),
    }
}

/// Fidelity (the seeds' numbers): `query_responses` is a result poll like
/// get_execution_status: 2,000 ms while agents may still answer, null once finished.
#[tokio::test]
async fn query_responses_says_when_to_poll_again() {
    let services = services().await;
    let agent = enroll(&services).await;
    let c = ctx(&services, "operator", &["Operator"]);
    let started =
        call(&c, "execute_instruction", json!({"definition": "os_facts", "agent_ids": [agent]})).await.unwrap();
    let id = started["execution_id"].clone();
    let waiting = call(&c, "query_responses", json!({"execution_id": id})).await.unwrap();
    assert_eq!(waiting["retry_after_ms"], 2000, "{waiting}");
    call(&c, "cancel_execution", json!({"execution_id": id})).await.unwrap();
    let finished = call(&c, "query_responses", json!({"execution_id": id})).await.unwrap();
    assert_eq!(finished["retry_after_ms"], Value::Null, "{finished}");
}

/// Fidelity: `query_responses` pages by a cursor in arrival order, marks a page its limit cut
/// (`result_truncated_by_cap`), hands out no cursor once the execution is finished and read,
/// and refuses a cursor it did not make or made for another query, saying which.
#[tokio::test]
async fn query_responses_pages_by_cursor_and_marks_a_cut_page() {
    use toolgate_domain::fleet::instruction::StepStatus;
    use toolgate_domain::fleet::wire::{RunResult, StepResult};
    let services = services().await;
    let mut agents = Vec::new();
    for _ in 0..3 {
        agents.push(enroll(&services).await);
    }
    let c = ctx(&services, "operator", &["Operator"]);
    let started =
        call(&c, "execute_instruction", json!({"definition": "os_facts", "agent_ids": agents})).await.unwrap();
    let id = started["execution_id"].as_str().unwrap().to_string();
    let work = &services.repositories().work;
    work.mark_delivered(&id, agents.clone(), Clock::default().now_ms()).await.unwrap();
    for (n, agent) in agents.iter().enumerate() {
        let row = json!({"hostname": format!("h{n}")}).as_object().cloned().unwrap();
        let step = StepResult { status: StepStatus::Succeeded, error: None, rows: vec![row] };
        let result = RunResult { execution_id: id.clone(), steps: vec![step] };
        work.save_result(agent, result, Clock::default().now_ms()).await.unwrap();
    }
    let first = call(&c, "query_responses", json!({"execution_id": id, "limit": 2})).await.unwrap();
    assert_eq!((first["rows"].as_array().unwrap().len(), &first["result_truncated_by_cap"]), (2, &json!(true)));
    let cursor = first["next_cursor"].as_str().expect("a cut page says where to go on").to_string();
    let rest = call(&c, "query_responses", json!({"execution_id": id, "limit": 2, "cursor": cursor})).await.unwrap();
    assert_eq!(rest["rows"].as_array().unwrap().len(), 1, "{rest}");
    assert_eq!(
        (&rest["result_truncated_by_cap"], &rest["next_cursor"]),
        (&json!(false), &Value::Null),
        "finished, all read"
    );
    let hosts: Vec<&Value> = first["rows"]
        .as_array()
        .unwrap()
        .iter()
        .chain(rest["rows"].as_array().unwrap())
        .map(|r| &r["values"]["hostname"])
        .collect();
    assert_eq!(hosts, [&json!("h0"), &json!("h1"), &json!("h2")], "in the order they arrived");
    for (bad, says) in [("not-a-cursor", "is not a cursor"), ("exe-0000/0/1", "pages execution `exe-0000`")] {
        match call(&c, "query_responses", json!({"execution_id": id, "cursor": bad})).await {
            Err(ToolError::InvalidArguments(message)) => assert!(message.contains(says), "{message}"),
            other => panic!("{bad}: {other:?}"),
        }
    }
}

/// An engine principal never approves: even holding a role that grants deciding (granted
/// before the policy made it human-only), it is told why, in the seeds' words.
#[tokio::test]
async fn an_engine_principal_is_refused_approving_as_one() {
    let services = services().await;
    let mut caller = ctx(&services, "supervised", &["Administrator"]).caller().clone();
    caller.principal.name = "engine:ci".into();
    caller.principal.kind = toolgate_domain::engines::PrincipalKind::Engine;
    let engine = ToolContext::builder(services.clone()).caller(caller).reach(Reach::Fleet).build();
    for tool in ["approve_request", "reject_request"] {
        let id = ToolId::from_name(tool).unwrap();
        match dispatch(id, &engine, json!({"approval_id": "x"})).await {
            Err(ToolError::Refused { message, .. }) => {
                assert!(message.starts_with("approver_assurance_required:engine_principal"), "{message}")
            }
            other => panic!("{tool}: {other:?}"),
        }
    }
}

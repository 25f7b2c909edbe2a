//! Engine principals end to end, over MCP against the real binary: created, given a role and
//! a credential at the supervised tier (each a person's approval), used by automation, never
//! holding a human-only role, never approving; its owner kept until it is transferred; revoked
//! with its credentials, which the server then refuses.

mod common;

use common::agents::{approval_id, output_schemas, structured_as};
use common::console::{Reviewer, approve, reviewer};
use common::{Server, call_as, start};
use serde_json::{Value, json};

/// A supervised call: its ticket, a person's approval, then the recall's result.
fn approved(s: &Server, rita: &Reviewer, token: &str, tool: &str, arguments: Value) -> Value {
    let id = approval_id(&call_as(s, token, tool, arguments.clone()));
    assert_eq!(approve(s, rita, &id).status, 200);
    let mut recalled = arguments;
    recalled["approval_id"] = id.into();
    let answer = call_as(s, token, tool, recalled).json();
    assert_ne!(answer["result"]["isError"], true, "{tool}: {answer}");
    answer["result"]["structuredContent"].clone()
}

fn refusal_text(answer: &Value) -> String {
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    answer["result"]["content"][0]["text"].as_str().unwrap().to_string()
}

#[test]
fn an_engine_principal_is_created_used_kept_from_people_s_powers_and_revoked() {
    let s = start(&[]);
    let schemas = output_schemas(&s);
    let rita = reviewer(&s, "rita");
    s.cli(&["principal", "add", "olga", "--role", "Viewer"]);
    let admin = s.token("admin", "supervised", "1d");

    let created = approved(
        &s,
        &rita,
        &admin,
        "create_engine_principal",
        json!({"principal_id": "engine:ci-deploy", "display_name": "CI deploys", "owner_username": "olga",
               "justification": "ships releases", "classification": "internal", "concurrent_requests": 4}),
    );
    assert_eq!((created["owner"].as_str(), created["created_by"].as_str()), (Some("olga"), Some("admin")));
    assert_eq!(
        created["quota"],
        json!({"requests_per_minute": 600, "concurrent_requests": 4}),
        "its own limit, else the policy's"
    );

    // Roles: never a human-only one (refused before any ticket); a reader's one, with approval.
    let human_only =
        call_as(&s, &admin, "assign_engine_role", json!({"principal_id": "engine:ci-deploy", "role": "Administrator"}));
    let text = refusal_text(&human_only.json());
    assert!(text.contains("human-only"), "{text}");
    approved(&s, &rita, &admin, "assign_engine_role", json!({"principal_id": "ci-deploy", "role": "Viewer"}));
    // The people's role tools do not take an engine principal (their names hold no `:`).
    let people_tool =
        call_as(&s, &admin, "assign_rbac_role", json!({"principal": "engine:ci-deploy", "role": "Viewer"}));
    assert!(refusal_text(&people_tool.json()).contains("invalid arguments for assign_rbac_role: /principal"));

    // A credential, used by the automation.
    let minted = approved(
        &s,
        &rita,
        &admin,
        "mint_engine_credential",
        json!({"principal_id": "engine:ci-deploy", "ttl_days": 7}),
    );
    let engine_token = minted["secret"].as_str().unwrap().to_string();
    assert_eq!(minted["tier"], "readonly", "policy.yaml engines.credential_tier");
    let listed = structured_as(&s, &schemas, &engine_token, "list_agents", json!({}));
    assert_eq!(listed["total"], 0, "{listed}");
    // It never approves: no role it may hold grants deciding (the handler's own refusal, for
    // a grant held before the policy said so, is in tests/handlers.rs).
    let supervised = approved(
        &s,
        &rita,
        &admin,
        "mint_engine_credential",
        json!({"principal_id": "engine:ci-deploy", "tier": "supervised", "ttl_days": 1}),
    );
    let approving =
        call_as(&s, supervised["secret"].as_str().unwrap(), "approve_request", json!({"approval_id": "x"})).json();
    assert_eq!(approving["error"]["code"], -32003, "{approving}");

    let shown =
        structured_as(&s, &schemas, &admin, "get_engine_principal", json!({"principal_id": "engine:ci-deploy"}));
    assert_eq!((shown["roles"].clone(), shown["credentials"].as_array().unwrap().len()), (json!(["Viewer"]), 2));
    let audit = structured_as(&s, &schemas, &admin, "audit_engine_no_admin", json!({}));
    assert_eq!((audit["checked"].clone(), audit["violations"].clone()), (json!(1), json!([])));

    // Its owner stays until it is transferred.
    let removal = s.cli_output(&["principal", "remove", "olga"]);
    assert!(!removal.status.success());
    let said = String::from_utf8_lossy(&removal.stderr);
    assert!(said.contains("owns the engine principals engine:ci-deploy") && said.contains("transfer"), "{said}");
    s.cli(&["principal", "add", "pat", "--role", "Viewer"]);
    let moved = approved(
        &s,
        &rita,
        &admin,
        "transfer_engine_principal_owner",
        json!({"principal_id": "engine:ci-deploy", "new_owner": "pat"}),
    );
    assert_eq!((moved["previous_owner"].as_str(), moved["changed"].as_bool()), (Some("olga"), Some(true)));
    assert!(s.cli(&["principal", "remove", "olga"]).contains("removed principal `olga`"));

    // Revoked: its credential is refused at once by this server.
    let revoked = approved(
        &s,
        &rita,
        &admin,
        "revoke_engine_principal",
        json!({"principal_id": "engine:ci-deploy", "reason": "retired"}),
    );
    assert_eq!((revoked["changed"].as_bool(), revoked["credentials_revoked"].as_i64()), (Some(true), Some(2)));
    assert_eq!(call_as(&s, &engine_token, "list_agents", json!({})).status, 401);
    let rows = structured_as(&s, &schemas, &admin, "query_audit_log", json!({"action": "engine.", "limit": 100}));
    let actions: Vec<&str> =
        rows["entries"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    for expected in
        ["engine.create", "engine.role_assign", "engine.mint_credential", "engine.transfer_owner", "engine.revoke"]
    {
        assert!(actions.contains(&expected), "{expected} in {actions:?}");
    }
}

//! Engine principals end to end, over MCP against the real binary: created, given a role and
//! a credential at the supervised tier (each a person's approval), used by automation, never
//! holding a human-only role, never approving; its owner kept until it is transferred; revoked
//! with its credentials, which the server then refuses.

use crate::common;

use common::agents::{output_schemas, structured_as};
use common::console::{Reviewer, approve, reviewer};
use common::{Server, call_as, start};
use serde_json::{Value, json};

/// A supervised call: its ticket, a person's approval, then the recall's result.
fn approved(s: &Server, rita: &Reviewer, token: &str, tool: &str, arguments: Value) -> Value {
    common::console::approved_on(s, s, rita, token, tool, arguments)
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
    // The console command keeps the same rule.
    let by_cli = s.cli_output(&["engine", "assign", "engine:ci-deploy", "ApiTokenManager"]);
    let said = String::from_utf8_lossy(&by_cli.stderr);
    assert!(!by_cli.status.success() && said.contains("is human-only"), "{said}");
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
    // a grant held before the policy said so, is in tests/suite/handlers.rs).
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

/// A credential rotation: both credentials work in the overlap; confirming names the
/// successor and its secret, and the predecessor is refused after. The gate's precondition
/// refuses a confirm that names no pending rotation before any ticket is made, a replay once
/// it resolved (writing nothing), and a recall whose rotation stopped being pending after the
/// ticket was approved, which then stays unconsumed.
#[test]
fn a_rotation_overlaps_is_confirmed_once_and_its_precondition_keeps_tickets() {
    let s = start(&[]);
    let schemas = output_schemas(&s);
    let rita = reviewer(&s, "rita");
    let admin = s.token("admin", "supervised", "1d");
    let id = "engine:nightly";
    approved(
        &s,
        &rita,
        &admin,
        "create_engine_principal",
        json!({"principal_id": id, "display_name": "Nightly", "owner_username": "admin",
               "justification": "reports", "classification": "internal"}),
    );
    approved(&s, &rita, &admin, "assign_engine_role", json!({"principal_id": id, "role": "Viewer"}));
    let first = approved(&s, &rita, &admin, "mint_engine_credential", json!({"principal_id": id}));
    let old_secret = first["secret"].as_str().unwrap().to_string();

    let rotated =
        approved(&s, &rita, &admin, "rotate_engine_credential", json!({"principal_id": id, "overlap_days": 2}));
    let (successor, new_secret) = (rotated["successor_id"].as_str().unwrap(), rotated["secret"].as_str().unwrap());
    assert_eq!(rotated["predecessor_id"], first["token_id"]);
    for secret in [&old_secret, new_secret] {
        assert_eq!(
            structured_as(&s, &schemas, secret, "list_agents", json!({}))["total"],
            0,
            "both work in the overlap"
        );
    }
    let again = call_as(&s, &admin, "rotate_engine_credential", json!({"principal_id": id})).json();
    let ticket = approval_id_of(&again);
    approve(&s, &rita, &ticket);
    let mut recalled = json!({"principal_id": id, "approval_id": ticket});
    let refused = call_as(&s, &admin, "rotate_engine_credential", recalled.take()).json();
    assert_eq!(refused["error"]["code"], -32003, "{refused}");
    assert!(
        refused["error"]["message"].as_str().unwrap().contains("a rotation of engine:nightly is pending"),
        "{refused}"
    );

    // A confirm naming no pending rotation: refused before any ticket is made.
    let pending_before = structured_as(&s, &schemas, &admin, "list_pending_approvals", json!({}))["count"].clone();
    let stale = json!({"principal_id": id, "token_id": first["token_id"], "secret": old_secret});
    let answer = call_as(&s, &admin, "confirm_engine_rotation", stale).json();
    assert_eq!(answer["error"]["code"], -32003, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("has no rotation to"), "{answer}");
    assert_eq!(structured_as(&s, &schemas, &admin, "list_pending_approvals", json!({}))["count"], pending_before);

    let confirm = json!({"principal_id": id, "token_id": successor, "secret": new_secret});
    let confirm_ticket = approval_id_of(&call_as(&s, &admin, "confirm_engine_rotation", confirm.clone()).json());
    approve(&s, &rita, &confirm_ticket);
    let mut confirm_recall = confirm.clone();
    confirm_recall["approval_id"] = confirm_ticket.clone().into();
    let confirmed = call_as(&s, &admin, "confirm_engine_rotation", confirm_recall.clone()).json();
    let confirmed = confirmed["result"]["structuredContent"].clone();
    assert_eq!(confirmed["revoked_predecessor_id"], first["token_id"]);
    assert_eq!(call_as(&s, &old_secret, "list_agents", json!({})).status, 401, "the predecessor is refused");
    assert_eq!(structured_as(&s, &schemas, new_secret, "list_agents", json!({}))["total"], 0);
    // A replay after it resolved writes nothing and says so, as terminal.
    let replay = call_as(&s, &admin, "confirm_engine_rotation", confirm).json();
    assert_eq!(replay["error"]["code"], -32003, "{replay}");
    assert!(replay["error"]["message"].as_str().unwrap().contains("already confirmed"), "{replay}");
    assert_eq!(replay["error"]["data"]["retry_after_ms"], Value::Null, "not retryable: {replay}");
    // Issue 43, LOW 13: replaying the consumed ticket itself answered that "the ticket stays
    // unconsumed" while the store said `consumed`. The answer tells the truth about the ticket.
    let replayed = call_as(&s, &admin, "confirm_engine_rotation", confirm_recall).json();
    assert_eq!(replayed["error"]["code"], -32003, "{replayed}");
    let message = replayed["error"]["message"].as_str().unwrap();
    assert!(message.contains("it was already used") && !message.contains("unconsumed"), "{message}");
    let status = s.http("GET", &format!("/api/v1/approvals/{confirm_ticket}"), Some(&admin), None).json();
    assert_eq!(status["status"], "consumed", "{status}");

    // An approved ticket whose rotation stopped being pending before its recall stays unconsumed.
    let next = approved(&s, &rita, &admin, "rotate_engine_credential", json!({"principal_id": id}));
    let next_confirm = json!({"principal_id": id, "token_id": next["successor_id"], "secret": next["secret"]});
    let ticket = approval_id_of(&call_as(&s, &admin, "confirm_engine_rotation", next_confirm.clone()).json());
    assert_eq!(approve(&s, &rita, &ticket).status, 200);
    let revoked = approved(&s, &rita, &admin, "revoke_api_token", json!({"token_id": next["predecessor_id"]}));
    assert_eq!(revoked["changed"], true);
    let mut recall = next_confirm;
    recall["approval_id"] = ticket.clone().into();
    let kept = call_as(&s, &admin, "confirm_engine_rotation", recall).json();
    assert_eq!(kept["error"]["code"], -32003, "{kept}");
    let message = kept["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("approval cannot be redeemed right now") && message.contains("was revoked"),
        "{message}"
    );
    let status = s.http("GET", &format!("/api/v1/approvals/{ticket}"), Some(&admin), None).json();
    assert_eq!(status["status"], "approved", "unconsumed and recallable: {status}");
    let rows = structured_as(&s, &schemas, &admin, "query_audit_log", json!({"action": "engine.rotat", "limit": 20}));
    let actions: Vec<&str> =
        rows["entries"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert!(
        actions.contains(&"engine.rotation_confirmed") && actions.contains(&"engine.rotate_credential"),
        "{actions:?}"
    );
}

fn approval_id_of(answer: &Value) -> String {
    assert_eq!(answer["error"]["code"], -32006, "expected an approval ticket: {answer}");
    answer["error"]["data"]["approval_id"].as_str().unwrap().to_string()
}

/// An engine principal past its request rate gets 429 with -32010 and the bucket's refill
/// time (the seeds' second cause of that code); a person's requests meanwhile are not
/// counted, and the quota-exhaustion counter says what happened.
#[test]
fn past_its_quota_an_engine_principal_waits_and_a_person_does_not() {
    let s = start(&[]);
    let schemas = output_schemas(&s);
    let rita = reviewer(&s, "rita");
    let admin = s.token("admin", "supervised", "1d");
    let id = "engine:burst";
    approved(
        &s,
        &rita,
        &admin,
        "create_engine_principal",
        json!({"principal_id": id, "display_name": "Burst", "owner_username": "admin", "justification": "load",
               "classification": "internal", "requests_per_minute": 3}),
    );
    approved(&s, &rita, &admin, "assign_engine_role", json!({"principal_id": id, "role": "Viewer"}));
    let engine = approved(&s, &rita, &admin, "mint_engine_credential", json!({"principal_id": id}));
    let engine = engine["secret"].as_str().unwrap();
    for _ in 0..3 {
        structured_as(&s, &schemas, engine, "list_agents", json!({}));
    }
    let over = call_as(&s, engine, "list_agents", json!({}));
    assert_eq!(over.status, 429, "{over:?}");
    let body = over.json();
    assert_eq!((body["error"]["code"].as_i64(), body["id"].clone()), (Some(-32010), Value::Null), "{body}");
    assert_eq!(body["error"]["message"], "per-principal rate limit exceeded");
    let wait = body["error"]["data"]["retry_after_ms"].as_u64().unwrap();
    assert!((1..=20_000).contains(&wait), "about a third of a minute at most: {wait}");
    assert!(over.header("retry-after").is_some(), "{over:?}");
    for _ in 0..10 {
        structured_as(&s, &schemas, &admin, "list_agents", json!({}));
    }
    let metrics = s.http("GET", "/metrics", Some(&rita.api), None).body;
    assert!(
        metrics.contains(r#"toolgate_principal_quota_exhausted_total{side="mcp",limit="rate"} 1"#)
            || metrics.contains(r#"toolgate_principal_quota_exhausted_total{limit="rate",side="mcp"} 1"#),
        "{}",
        metrics.lines().filter(|l| l.contains("quota")).collect::<Vec<_>>().join("\n")
    );
}

/// Issue 43, MEDIUM 6 and LOW 9: a principal with Administrator on one management group was
/// given approval tickets (not refusals) for the fleet's own security tools, read the KEK's
/// status fleet-wide, and once a reviewer approved, minted credentials for engine principals
/// holding fleet-wide roles; audit_engine_no_admin answered it with a fleet-wide count. What
/// is not about one group's agents is now granted fleet-wide only: refused with -32003 before
/// any ticket, while the same group role still quarantines within its group.
#[test]
fn a_group_administrator_reaches_nothing_fleet_wide() {
    let s = start(&[]);
    let out = s.cli(&["group", "create", "Team", "--rule", "tag:team = a"]);
    let group = out.split_whitespace().find(|w| w.starts_with("mg-")).unwrap().to_string();
    s.cli(&["principal", "add", "carol"]);
    s.cli(&["group", "assign", &group, "carol", "Administrator"]);
    let carol = s.token("carol", "supervised", "1d");
    let engine = json!({"principal_id": "engine:ci", "display_name": "CI", "owner_username": "carol",
                        "justification": "builds", "classification": "internal"});
    let calls = [
        ("rotate_kek", json!({})),
        ("rewrap_secrets", json!({})),
        ("issue_code_signing_cert", json!({})),
        ("create_engine_principal", engine),
        ("mint_engine_credential", json!({"principal_id": "engine:ci"})),
        ("get_kek_status", json!({})),
        ("audit_engine_no_admin", json!({})),
    ];
    for (tool, arguments) in calls {
        let answer = call_as(&s, &carol, tool, arguments).json();
        assert_eq!(answer["error"]["code"], -32003, "{tool}: refused, never a ticket: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("fleet-wide grant"), "{tool}: {message}");
    }
    let pending = call_as(&s, &s.token("admin", "supervised", "1d"), "list_pending_approvals", json!({})).json();
    assert_eq!(pending["result"]["structuredContent"]["count"], 0, "no ticket was minted: {pending}");
    // What is about the group's agents stays hers: listing its quarantined devices.
    let within = call_as(&s, &carol, "list_quarantined_devices", json!({})).json();
    assert_eq!(within["result"]["isError"], false, "{within}");
}

/// Issue 43, LOW 12: create_engine_principal with an unknown owner, or an engine as owner,
/// minted a ticket a reviewer then approved for nothing. It is refused before any ticket.
#[test]
fn an_engine_s_owner_must_be_a_person_before_any_ticket() {
    let s = start(&[]);
    let rita = reviewer(&s, "rita");
    let admin = s.token("admin", "supervised", "1d");
    let engine = |id: &str, owner: &str| {
        json!({"principal_id": id, "display_name": "E", "owner_username": owner,
               "justification": "j", "classification": "internal"})
    };
    approved(&s, &rita, &admin, "create_engine_principal", engine("engine:first", "admin"));
    for (owner, says) in [("nobody", "there is no principal `nobody`"), ("engine:first", "is an engine principal")] {
        let answer = call_as(&s, &admin, "create_engine_principal", engine("engine:second", owner)).json();
        assert_eq!(answer["error"]["code"], -32003, "{owner}: refused before a ticket: {answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains(says), "{answer}");
    }
    let pending = call_as(&s, &admin, "list_pending_approvals", json!({})).json();
    assert_eq!(pending["result"]["structuredContent"]["count"], 0, "{pending}");
}

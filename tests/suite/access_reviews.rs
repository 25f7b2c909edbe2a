//! Access reviews end to end over MCP against the real binary: a campaign over people, an
//! engine principal, a role on a group and tokens; self-attestation refused; closing refused
//! while grants are undecided, then applying every flag at once (a revoked token refused at
//! once); the export's digest is its own and is in the audit log.

use crate::common;

use common::agents::{output_schemas_as, structured_as};
use common::{call_as, start};
use serde_json::json;
use toolgate_domain::secrets::sha256_hex;

#[test]
fn a_campaign_is_decided_by_others_closed_all_at_once_and_exported_with_its_digest() {
    let s = start(&[]);
    s.cli(&["principal", "add", "rita", "--role", "Administrator"]);
    let admin = s.token("admin", "supervised", "1d");
    let rita = s.token("rita", "supervised", "1d");
    let schemas = output_schemas_as(&s, &admin);
    s.cli(&["principal", "add", "bob", "--role", "Viewer", "--role", "Operator"]);
    let group = s.cli(&["group", "create", "Team"]);
    let group = group.split_whitespace().find(|w| w.starts_with("mg-")).unwrap().to_string();
    s.cli(&["group", "assign", &group, "bob", "Operator"]);
    let bobs = s.token("bob", "readonly", "1d");
    s.cli(&[
        "engine",
        "create",
        "engine:ci",
        "--owner",
        "admin",
        "--display-name",
        "CI",
        "--justification",
        "j",
        "--classification",
        "internal",
    ]);
    s.cli(&["engine", "assign", "engine:ci", "Viewer"]);
    structured_as(&s, &schemas, &bobs, "list_agents", json!({}));

    let opened = structured_as(&s, &schemas, &admin, "open_access_review", json!({"title": "Q4 review"}));
    let id = opened["campaign_id"].as_str().unwrap().to_string();
    let detail = structured_as(&s, &schemas, &rita, "get_access_review", json!({"campaign_id": id}));
    let grants = detail["grants"].as_array().unwrap().clone();
    let types: std::collections::BTreeSet<&str> =
        grants.iter().map(|g| g["principal_type"].as_str().unwrap()).collect();
    assert_eq!(types.into_iter().collect::<Vec<_>>(), ["engine", "group", "token", "user"], "{detail}");

    // Nobody decides a grant of their own.
    let own = grants.iter().find(|g| g["holder"] == "rita" && g["principal_type"] == "user").unwrap();
    let mut attempt = json!({"campaign_id": id, "principal_type": "user", "principal_id": "rita",
                             "role_name": own["role_name"], "decision": "attested"});
    let refused = call_as(&s, &rita, "record_attestation", attempt.clone()).json();
    assert!(refused.to_string().contains("may not attest or flag its own grants"), "{refused}");

    // Closing waits for every decision (policy.yaml access_reviews.close_with_undecided: false).
    let early = call_as(&s, &rita, "close_access_review", json!({"campaign_id": id})).json();
    assert!(early.to_string().contains("have no decision"), "{early}");

    let bobs_token_id = s
        .cli(&["token", "list"])
        .lines()
        .find(|l| l.contains("bob"))
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    for g in &grants {
        let flagged =
            g["holder"] == "bob" && (g["role_name"] == "Operator" || g["principal_id"] == bobs_token_id.as_str());
        let by = if g["holder"] == "rita" { &admin } else { &rita };
        let mut decision = json!({"campaign_id": id, "principal_type": g["principal_type"], "principal_id": g["principal_id"],
                                  "role_name": g["role_name"], "decision": if flagged { "flagged_revoke" } else { "attested" },
                                  "justification": "reviewed in the Q4 meeting"});
        if !g["group_id"].is_null() {
            decision["group_id"] = g["group_id"].clone();
        }
        structured_as(&s, &schemas, by, "record_attestation", decision);
    }
    attempt["decision"] = "flagged_revoke".into();
    let closed = structured_as(&s, &schemas, &rita, "close_access_review", json!({"campaign_id": id}));
    assert_eq!(closed["revoked"].as_array().unwrap().len(), 3, "{closed}");
    assert_eq!(closed["undecided"], json!([]));
    assert_eq!(call_as(&s, &bobs, "list_agents", json!({})).status, 401, "a revoked token is refused at once");
    let list = s.cli(&["principal", "list"]);
    assert!(list.lines().any(|l| l.starts_with("bob ") && l.trim_end().ends_with("Viewer")), "{list}");
    let shown = s.cli(&["group", "show", &group]);
    assert!(!shown.contains("bob holds"), "{shown}");
    let late = call_as(&s, &rita, "record_attestation", attempt).json();
    assert!(late.to_string().contains("is closed"), "{late}");

    let export = structured_as(&s, &schemas, &admin, "export_access_review", json!({}));
    assert_eq!(export["campaign_id"], id.as_str(), "the latest closed campaign");
    let csv = export["csv"].as_str().unwrap();
    assert_eq!(export["sha256_csv"], sha256_hex(csv).as_str());
    assert_eq!(export["sha256_json"], sha256_hex(export["json"].as_str().unwrap()).as_str());
    assert_eq!(csv.lines().count(), grants.len() + 1, "a header and a line per grant");
    let rows =
        structured_as(&s, &schemas, &admin, "query_audit_log", json!({"action": "access_review.", "limit": 100}));
    let entries = rows["entries"].as_array().unwrap();
    let recorded = entries.iter().find(|e| e["action"] == "access_review.export").unwrap();
    assert!(recorded["detail"].as_str().unwrap().contains(export["sha256_csv"].as_str().unwrap()), "{recorded}");
    assert_eq!(entries.iter().filter(|e| e["action"] == "access_review.revoke").count(), 3);
}

/// `toolgate explain` on each of the identity tools: its pair, its tiers, and what else
/// decides it (the rotation confirm's precondition).
#[test]
fn every_identity_tool_is_explained() {
    let tools = [
        "create_engine_principal",
        "list_engine_principals",
        "get_engine_principal",
        "revoke_engine_principal",
        "mint_engine_credential",
        "rotate_engine_credential",
        "confirm_engine_rotation",
        "transfer_engine_principal_owner",
        "assign_engine_role",
        "unassign_engine_role",
        "list_engine_roles",
        "audit_engine_no_admin",
        "open_access_review",
        "list_access_reviews",
        "get_access_review",
        "record_attestation",
        "close_access_review",
        "export_access_review",
    ];
    for tool in tools {
        let out = std::process::Command::new(common::bin()).args(["explain", tool]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{tool}: {}", String::from_utf8_lossy(&out.stderr));
        let meta = toolgate::registry::ToolId::from_name(tool).unwrap().meta();
        assert!(
            text.contains(&format!("permission  {}", meta.pair())) && text.contains("supervised"),
            "{tool}: {text}"
        );
    }
    let confirm =
        std::process::Command::new(common::bin()).args(["explain", "confirm_engine_rotation"]).output().unwrap();
    assert!(String::from_utf8_lossy(&confirm.stdout).contains("requires    the rotation"));
}

/// On the console a signed-in reviewer sees the open campaign, is offered no form for its own
/// grants, and records a decision with its fresh second-factor proof, audited with it.
#[test]
fn a_reviewer_attests_on_the_console_with_a_second_factor() {
    let s = start(&[]);
    let rita = common::console::reviewer(&s, "rita");
    let admin = s.token("admin", "supervised", "1d");
    let schemas = output_schemas_as(&s, &admin);
    s.cli(&["principal", "add", "bob", "--role", "Viewer"]);
    let opened = structured_as(&s, &schemas, &admin, "open_access_review", json!({"title": "console"}));
    let id = opened["campaign_id"].as_str().unwrap();
    let page = common::console::get(&s, "/console/reviews", &rita.cookie);
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains(&format!("review-{id}")), "{}", page.body);
    assert!(page.body.contains("yours: another reviewer decides it"), "rita's own grants: {}", page.body);
    let cookie = format!("toolgate_console={}", rita.cookie);
    let fields = [
        ("csrf", rita.csrf.as_str()),
        ("principal_type", "user"),
        ("principal_id", "bob"),
        ("role_name", "Viewer"),
        ("group_id", ""),
        ("justification", "still on the team"),
        ("decision", "attested"),
    ];
    let done = common::console::post_form(&s, &format!("/console/reviews/{id}/attest"), &cookie, &fields);
    assert_eq!(done.status, 200, "{}", done.body);
    assert!(done.body.contains("Recorded attested on bob Viewer"), "{}", done.body);
    let detail = structured_as(&s, &schemas, &admin, "get_access_review", json!({"campaign_id": id}));
    let bob = detail["grants"].as_array().unwrap().iter().find(|g| g["principal_id"] == "bob").unwrap().clone();
    assert_eq!((bob["decision"].as_str(), bob["decided_by"].as_str()), (Some("attested"), Some("rita")), "{bob}");
    let rows = structured_as(&s, &schemas, &admin, "query_audit_log", json!({"action": "access_review.decision"}));
    assert!(rows["entries"][0]["detail"].as_str().unwrap().contains("assurance: password+totp"), "{rows}");
}

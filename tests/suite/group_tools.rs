//! The management-group tools, the fleet-wide role tools and unlock_account over MCP, with a
//! real server, its local agent, a reviewer signed in to the console, and the CLI.

use crate::common;

use common::agents::{approval_id, approved, output_schemas, structured_as};
use common::console::{approve, reviewer, set_password, sign_in};
use common::{call_as, start_with_agent};
use serde_json::{Value, json};

/// The answer's JSON-RPC error code and message (a refusal of the gate or a handler).
fn refused(answer: &Value) -> (i64, String) {
    (
        answer["error"]["code"].as_i64().unwrap_or_default(),
        answer["error"]["message"].as_str().unwrap_or_default().into(),
    )
}

#[test]
fn groups_roles_and_accounts_are_managed_through_their_tools() {
    let (s, agent) = start_with_agent(&[]);
    let schemas = output_schemas(&s);
    let api = reviewer(&s, "reviewer");
    let admin = s.token("admin", "supervised", "1d");

    // An administrator creates a group (a person approves: ManagementGroup:Write is gated).
    let (created, _) = approved(
        &s,
        &admin,
        &api,
        "create_management_group",
        json!({"name": "Payments", "description": "the payments team"}),
    );
    let group = created["group"]["id"].as_str().unwrap().to_string();
    assert_eq!(created["group"]["parent_id"], "all");
    let (added, _) =
        approved(&s, &admin, &api, "add_management_group_member", json!({"group_id": group, "agent_id": agent}));
    assert_eq!(added["changed"], true);
    let shown = structured_as(&s, &schemas, &admin, "get_management_group", json!({"group_id": group}));
    assert_eq!((shown["agents"].clone(), shown["members"][0]["explicit"].clone()), (json!(1), json!(true)), "{shown}");

    // dana owns the group; erin only operates it.
    s.cli(&["principal", "add", "dana"]);
    s.cli(&["principal", "add", "erin"]);
    for (who, role) in [("dana", "ITServiceOwner"), ("erin", "Operator")] {
        let (granted, _) = approved(
            &s,
            &admin,
            &api,
            "assign_management_group_role",
            json!({"group_id": group, "principal": who, "role": role}),
        );
        assert_eq!(granted["changed"], true, "{granted}");
    }
    let dana = s.token("dana", "supervised", "1d");
    let erin = s.token("erin", "supervised", "1d");
    let mine = structured_as(&s, &schemas, &dana, "list_management_groups", json!({}));
    assert_eq!((mine["count"].clone(), mine["groups"][0]["id"].clone()), (json!(1), json!(group)), "{mine}");
    let roles = structured_as(&s, &schemas, &dana, "list_management_group_roles", json!({"group_id": group}));
    assert_eq!(roles["roles"].as_array().unwrap().len(), 2, "{roles}");
    // The compound gate: the owner of this group, not an operator of it, and not of the root.
    let (code, message) =
        refused(&call_as(&s, &erin, "list_management_group_roles", json!({"group_id": group})).json());
    assert_eq!(code, -32003);
    assert!(message.contains("the role ITServiceOwner on group"), "{message}");
    let (code, message) =
        refused(&call_as(&s, &dana, "list_management_group_roles", json!({"group_id": "all"})).json());
    assert!(code == -32003 && message.contains("a fleet-wide grant of ManagementGroup:Read"), "{message}");
    // Another group reads as unknown to dana.
    let (other, _) = approved(&s, &admin, &api, "create_management_group", json!({"name": "Logistics"}));
    let other = other["group"]["id"].as_str().unwrap().to_string();
    let unknown = call_as(&s, &dana, "get_management_group", json!({"group_id": other})).json();
    assert_eq!(unknown["result"]["isError"], true, "{unknown}");
    assert!(
        unknown["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with(&format!("no management group `{other}`"))
    );
    // An owner grants no role beyond its own, and cannot set a rule (it reads the whole fleet).
    let ticket = approval_id(&call_as(
        &s,
        &dana,
        "assign_management_group_role",
        json!({"group_id": group, "principal": "erin", "role": "Administrator"}),
    ));
    assert_eq!(approve(&s, &api, &ticket).status, 200);
    let beyond = call_as(
        &s,
        &dana,
        "assign_management_group_role",
        json!({"group_id": group, "principal": "erin", "role": "Administrator", "approval_id": ticket}),
    )
    .json();
    assert!(refused(&beyond).1.contains("beyond what a group's owner holds"), "{beyond}");
    let ticket = approval_id(&call_as(
        &s,
        &dana,
        "update_management_group",
        json!({"group_id": group, "rule": "agent_id exists"}),
    ));
    assert_eq!(approve(&s, &api, &ticket).status, 200);
    let widened = call_as(
        &s,
        &dana,
        "update_management_group",
        json!({"group_id": group, "rule": "agent_id exists", "approval_id": ticket}),
    )
    .json();
    assert!(refused(&widened).1.contains("chooses among the whole fleet"), "{widened}");
    // A membership tag (one a group's rule reads) is the group owner's to change, not its
    // operators'.
    let (ruled, _) = approved(
        &s,
        &admin,
        &api,
        "update_management_group",
        json!({"group_id": group, "rule": "tag:team = payments"}),
    );
    assert_eq!(ruled["after"]["rule"], "tag:team = payments", "{ruled}");
    let by_operator =
        call_as(&s, &erin, "set_tag", json!({"agent_id": agent, "key": "team", "value": "payments"})).json();
    assert!(refused(&by_operator).1.contains("`team` is a membership tag"), "{by_operator}");
    let by_owner =
        structured_as(&s, &schemas, &dana, "set_tag", json!({"agent_id": agent, "key": "team", "value": "payments"}));
    assert_eq!(by_owner["value"], "payments");
    // Child groups under its own are the owner's to make.
    let (child, _) =
        approved(&s, &dana, &api, "create_management_group", json!({"name": "Payments EU", "parent_id": group}));
    assert_eq!(child["group"]["parent_id"], json!(group));

    // Fleet-wide roles: decided by a durable administrator role, read afresh from the store.
    let (granted, _) = approved(&s, &admin, &api, "assign_rbac_role", json!({"principal": "erin", "role": "Viewer"}));
    assert_eq!(
        (granted["changed"].clone(), granted["roles_after"].clone()),
        (json!(true), json!(["Viewer"])),
        "{granted}"
    );
    let (code, message) =
        refused(&call_as(&s, &dana, "assign_rbac_role", json!({"principal": "dana", "role": "Administrator"})).json());
    assert!(
        code == -32003 && message.contains("the fleet-wide role Administrator"),
        "refused before any ticket: {message}"
    );
    s.cli(&["principal", "add", "frank", "--role", "Administrator"]);
    let frank = s.token("frank", "supervised", "1d");
    structured_as(&s, &schemas, &frank, "list_management_groups", json!({}));
    s.cli(&["principal", "add", "frank", "--role", "Viewer"]);
    let (code, message) = refused(
        &call_as(&s, &frank, "assign_rbac_role", json!({"principal": "frank", "role": "Administrator"})).json(),
    );
    assert!(code == -32003 && message.contains("read afresh"), "a cached credential does not decide: {message}");

    // A console account locked by failed sign-ins is unlocked by a person's decision.
    assert!(set_password(&s, "erin", "erin's long password here").status.success());
    for _ in 0..5 {
        sign_in(&s, "erin", "not the password", "");
    }
    let (unlocked, _) = approved(&s, &admin, &api, "unlock_account", json!({"principal": "erin"}));
    assert_eq!(
        (unlocked["changed"].clone(), unlocked["failed_attempts_before"].clone()),
        (json!(true), json!(5)),
        "{unlocked}"
    );
    let (again, _) = approved(&s, &admin, &api, "unlock_account", json!({"principal": "erin"}));
    assert_eq!(again["changed"], false);

    // Nothing is quarantined; every change above left a group audit row with before/after.
    let quarantined = structured_as(&s, &schemas, &admin, "list_quarantined_devices", json!({}));
    assert_eq!(quarantined["count"], 0);
    let rows =
        structured_as(&s, &schemas, &admin, "query_audit_log", json!({"target_type": "ManagementGroup", "limit": 100}));
    let actions: Vec<&str> =
        rows["entries"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    for action in ["group.create", "group.member_add", "group.role_assign"] {
        assert!(actions.contains(&action), "{action} missing from {actions:?}");
    }
    let (removed, _) = approved(
        &s,
        &admin,
        &api,
        "unassign_management_group_role",
        json!({"group_id": group, "principal": "erin", "role": "Operator"}),
    );
    assert_eq!(removed["changed"], true);
    let (gone, _) =
        approved(&s, &admin, &api, "remove_management_group_member", json!({"group_id": group, "agent_id": agent}));
    assert_eq!(gone["changed"], true);
    let (deleted, _) = approved(&s, &admin, &api, "delete_management_group", json!({"group_id": other}));
    assert_eq!(deleted["deleted"]["name"], "Logistics");
}

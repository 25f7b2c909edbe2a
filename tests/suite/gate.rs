//! The security gate against the real binary: the decision matrix for every tool and tier,
//! the whole approval story, kill switches, and the audit trail of every denial.

use crate::common;

use std::time::Duration;

use common::{
    Response, Server, call, call_as, modern, modern_headers, request, start, start_with_agent, start_with_env,
};
use serde_json::{Value, json};
use toolgate::registry::{MATRIX, Tier, ToolId};
use toolgate_policy::Decision;

fn code(r: &Response) -> Option<i64> {
    r.json()["error"]["code"].as_i64()
}

/// A principal with the roles and a token of the tier.
fn principal(s: &Server, name: &str, role: &str, tier: &str) -> String {
    s.cli(&["principal", "add", name, "--role", role]);
    s.token(name, tier, "1d")
}

/// An administrator's API credential (no MCP tier), for the approval and audit API.
fn reviewer(s: &Server) -> common::console::Reviewer {
    common::console::reviewer(s, "reviewer")
}

#[test]
fn every_tool_at_every_tier_gets_the_matrix_decision() {
    let s = start(&[]);
    // A principal may hold 25 pending approvals: a fresh one every 20 tickets.
    let (mut tickets, mut holders) = (0, 0);
    let mut holder = |tier: Tier| {
        holders += 1;
        principal(&s, &format!("root-{holders}"), "Administrator", tier.name())
    };
    for tier in Tier::ALL {
        let mut token = holder(tier);
        for id in ToolId::ALL {
            if tickets == 20 {
                (tickets, token) = (0, holder(tier));
            }
            let meta = id.meta();
            let arguments: Value =
                meta.example_arguments.map(|e| serde_json::from_str(e).unwrap()).unwrap_or(json!({}));
            let r = call_as(&s, &token, meta.name, arguments);
            let got = code(&r);
            match MATRIX[id.index()][tier.index()] {
                Decision::Deny => assert_eq!(got, Some(-32004), "{} at {}: {r:?}", meta.name, tier.name()),
                // A precondition on the live state is checked before any ticket: the example
                // names no such state, so the call stops there, past the tier and the grant.
                Decision::ApprovalRequired if meta.precondition.is_some() => {
                    assert_eq!(got, Some(-32003), "{} at {}: {r:?}", meta.name, tier.name());
                    assert!(r.body.contains("cannot run now"), "{} at {}: {r:?}", meta.name, tier.name());
                }
                Decision::ApprovalRequired => {
                    assert_eq!(got, Some(-32006), "{} at {}: {r:?}", meta.name, tier.name());
                    tickets += 1;
                }
                Decision::Allow => {
                    assert!(!matches!(got, Some(-32004 | -32006)), "{} at {}: {r:?}", meta.name, tier.name())
                }
                // Without a session that takes elicitation, the client's user cannot be asked:
                // the call is not run, and the result says why.
                Decision::ConfirmRequired => {
                    let result = &r.json()["result"];
                    assert_eq!(result["isError"], true, "{} at {}: {r:?}", meta.name, tier.name());
                    assert!(result["content"][0]["text"].as_str().unwrap().contains("elicitation"), "{r:?}");
                }
            }
        }
    }
}

fn approval_id(r: &Response) -> String {
    assert_eq!(code(r), Some(-32006), "{r:?}");
    let data = &r.json()["error"]["data"];
    assert_eq!(data["retry_after_ms"], 30000);
    let id = data["approval_id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32, "128 random bits, hex");
    assert_eq!(data["status_url"], format!("/api/v1/approvals/{id}"));
    id
}

fn approve(s: &Server, reviewer: &common::console::Reviewer, id: &str) -> Response {
    common::console::approve(s, reviewer, id)
}

#[test]
fn the_approval_story() {
    let (s, agent) = start_with_agent(&[]);
    let api = reviewer(&s);
    let admin = s.token.clone(); // operator tier, principal admin (Administrator)
    assert_eq!(
        call_as(&s, &admin, "set_tag", json!({"agent_id": agent, "key": "env", "value": "prod"})).json()["result"]["isError"],
        false
    );
    let args = json!({"agent_id": agent, "key": "env"});

    let first = call_as(&s, &admin, "delete_tag", args.clone());
    let id = approval_id(&first);
    assert_eq!(approval_id(&call_as(&s, &admin, "delete_tag", args.clone())), id, "minting is deduplicated");
    let mut recall = args.clone();
    recall["approval_id"] = json!(id);
    assert_eq!(approval_id(&call_as(&s, &admin, "delete_tag", recall.clone())), id, "pending: -32006 again, same id");

    // Reviewing: never the submitter, never an MCP token, never over MCP.
    let own = std::process::Command::new(common::bin())
        .args(["approvals", "approve", &id, "--as", "admin", "--data-dir"])
        .arg(s.data_dir.path())
        .output()
        .unwrap();
    assert!(!own.status.success() && String::from_utf8_lossy(&own.stderr).contains("must not be the submitter"));
    let bearer = s.http("POST", &format!("/api/v1/approvals/{id}/approve"), Some(&admin), Some("{}"));
    assert_eq!(
        (bearer.status, bearer.json()["error"].as_str()),
        (403, Some("console_session_required")),
        "no token ever decides"
    );
    let supervised = s.token("admin", "supervised", "1d");
    let r = call_as(&s, &supervised, "approve_request", json!({"approval_id": id}));
    assert_eq!(code(&r), Some(-32003));
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("approver_assurance_required:non_interactive_session")
    );
    let r = approve(&s, &api, &id);
    assert_eq!((r.status, r.json()["status"].as_str()), (200, Some("approved")), "{r:?}");

    // Tickets, reviews and consumption survive a restart (console sessions do not).
    let s = common::start_in(s.stop(), &[]);
    let mut api = api;
    common::console::sign_in_again(&s, &mut api);
    let mut wrong = recall.clone();
    wrong["key"] = json!("owner");
    let r = call_as(&s, &admin, "delete_tag", wrong);
    assert_eq!(code(&r), Some(-32003));
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("does not match"));
    let bob = principal(&s, "bob", "Operator", "operator");
    let foreign = call_as(&s, &bob, "delete_tag", recall.clone());
    assert_eq!(code(&foreign), Some(-32003), "{foreign:?}");

    let ran = call_as(&s, &admin, "delete_tag", recall.clone()).json();
    assert_eq!(ran["result"]["structuredContent"]["deleted_value"], "prod", "the recall runs the tool: {ran}");
    let replay = call_as(&s, &admin, "delete_tag", recall.clone());
    assert_eq!(code(&replay), Some(-32003));
    assert_eq!(
        replay.json()["error"]["message"],
        foreign.json()["error"]["message"],
        "a replay and a foreign recall read alike"
    );
    let tags = call_as(&s, &admin, "get_tags", json!({"agent_id": agent})).json();
    assert_eq!(tags["result"]["structuredContent"]["tags"], json!([]));
    let shown = s.http("GET", &format!("/api/v1/approvals/{id}"), Some(&api.api), None).json();
    assert_eq!(shown["status"], "consumed");

    // The audit rows tell the replay and the foreign recall apart.
    let rows = audit(&s, &api.api, "action=mcp.delete_tag&result=denied");
    let details: Vec<&str> = rows.iter().filter_map(|r| r["detail"].as_str()).collect();
    assert!(details.iter().any(|d| d.contains("another principal")), "{details:?}");
    assert!(details.iter().any(|d| d.contains("replay")), "{details:?}");

    // Rejected tickets and expired ones (7 days, with the clock moved across a restart).
    call_as(&s, &admin, "set_tag", json!({"agent_id": agent, "key": "k", "value": "v"}));
    let args2 = json!({"agent_id": agent, "key": "k"});
    let rejected = approval_id(&call_as(&s, &admin, "delete_tag", args2.clone()));
    let r = common::console::decide(&s, &api, &rejected, "reject", json!({"comment": "no"}));
    assert_eq!(r.status, 200, "{r:?}");
    let mut recall2 = args2.clone();
    recall2["approval_id"] = json!(rejected);
    assert!(
        call_as(&s, &admin, "delete_tag", recall2).json()["error"]["message"].as_str().unwrap().contains("rejected")
    );
    let late = approval_id(&call_as(&s, &admin, "delete_tag", args2.clone()));
    assert_ne!(late, rejected, "a decided ticket is not found again");
    assert_eq!(approve(&s, &api, &late).status, 200);
    let eight_days = (8 * 24 * 3600 * 1000).to_string();
    let s = start_with_env(s.stop(), &[], &[("TOOLGATE_TEST_CLOCK_OFFSET_MS", &eight_days)]);
    let mut recall3 = args2.clone();
    recall3["approval_id"] = json!(late);
    let r = call_as(&s, &admin, "delete_tag", recall3);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("expired"), "{r:?}");
}

fn audit(s: &Server, api: &str, query: &str) -> Vec<Value> {
    // The writer is asynchronous: give it a moment.
    for _ in 0..40 {
        let rows = s.http("GET", &format!("/api/v1/audit?{query}"), Some(api), None).json()["entries"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if !rows.is_empty() {
            return rows;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Vec::new()
}

#[test]
fn thirty_two_concurrent_recalls_run_the_tool_once() {
    let (s, agent) = start_with_agent(&[]);
    let api = reviewer(&s);
    let admin = s.token.clone();
    call_as(&s, &admin, "set_tag", json!({"agent_id": agent, "key": "k", "value": "v"}));
    let args = json!({"agent_id": agent, "key": "k"});
    let id = approval_id(&call_as(&s, &admin, "delete_tag", args.clone()));
    assert_eq!(approve(&s, &api, &id).status, 200);
    let mut recall = args;
    recall["approval_id"] = json!(id);
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(32));
    let outcomes: Vec<Response> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..32)
            .map(|_| {
                let (barrier, recall, s, admin) = (barrier.clone(), recall.clone(), &s, &admin);
                scope.spawn(move || {
                    barrier.wait();
                    call_as(s, admin, "delete_tag", recall)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ran = outcomes.iter().filter(|r| r.json()["result"]["isError"] == false).count();
    let refused = outcomes.iter().filter(|r| code(r) == Some(-32003)).count();
    assert_eq!((ran, refused), (1, 31), "exactly one execution");
}

#[test]
fn invalid_arguments_never_touch_a_ticket() {
    let s = start(&[]);
    let api = reviewer(&s);
    let admin = s.token.clone();
    let r = call_as(&s, &admin, "delete_tag", json!({"agent_id": "", "key": "k"})).json();
    assert_eq!(r["result"]["isError"], true);
    assert_eq!(
        s.http("GET", "/api/v1/approvals", Some(&api.api), None).json()["approvals"],
        json!([]),
        "no ticket minted"
    );
    let id = approval_id(&call_as(&s, &admin, "delete_tag", json!({"agent_id": "a", "key": "k"})));
    assert_eq!(approve(&s, &api, &id).status, 200);
    let r = call_as(&s, &admin, "delete_tag", json!({"agent_id": "a", "key": 5, "approval_id": id})).json();
    assert_eq!(r["result"]["isError"], true, "invalid arguments: {r}");
    let shown = s.http("GET", &format!("/api/v1/approvals/{id}"), Some(&api.api), None).json();
    assert_eq!(shown["status"], "approved", "nothing consumed");
}

#[test]
fn read_only_mode_on_both_eras() {
    let (s, agent) = start_with_agent(&["--read-only"]);
    let listed = s.post(&[("X-MCP-Toolsets", "all")], r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).json();
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"get_tags") && !names.contains(&"set_tag"), "{names:?}");
    let set = json!({"agent_id": agent, "key": "k", "value": "v"});
    let r = s.rpc(&[("MCP-Protocol-Version", "2025-11-25")], call("set_tag", set.clone()));
    assert_eq!(code(&r), Some(-32004), "handshake era: {r:?}");
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("read-only mode"));
    let r = s.rpc(
        &modern_headers("tools/call", Some("set_tag")),
        modern(2, "tools/call", json!({"name": "set_tag", "arguments": set})),
    );
    assert_eq!(code(&r), Some(-32004), "stateless era: {r:?}");
    let r = s.rpc(&[], call("get_tags", json!({"agent_id": agent})));
    assert_eq!(r.json()["result"]["isError"], false, "reads still run");
}

#[test]
fn disabled_mode_on_both_eras() {
    let s = start(&["--mcp-disable"]);
    for (headers, body) in [
        (vec![], r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_string()),
        (modern_headers("tools/list", None), modern(2, "tools/list", json!({})).to_string()),
    ] {
        let r = s.post(&headers, &body);
        assert_eq!((r.status, code(&r)), (503, Some(-32005)), "{r:?}");
        assert_eq!(r.json()["id"], Value::Null);
        assert!(r.json()["error"]["data"]["remediation"].is_string());
    }
    let text = format!("GET /healthz HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", s.addr);
    assert_eq!(common::raw(s.addr, text.as_bytes()).status, 200, "health stays up");
}

#[test]
fn every_denial_is_audited_with_the_clients_correlation_id() {
    let s = start(&[]);
    let api = reviewer(&s);
    let viewer = principal(&s, "viewer", "Viewer", "operator");
    let cases = [
        (s.token.clone(), "set_plugin_config", json!({"plugin": "p", "key": "k", "value": "v"}), "denied"),
        (viewer, "set_tag", json!({"agent_id": "a", "key": "k", "value": "v"}), "denied"),
        (s.token.clone(), "delete_tag", json!({"agent_id": "a", "key": "k"}), "pending"),
        (s.token.clone(), "get_tag", json!({}), "denied"),
        (s.token.clone(), "set_tag", json!({"agent_id": ""}), "denied"),
    ];
    for (token, tool, arguments, result) in cases {
        let r = call_as(&s, &token, tool, arguments).json();
        let correlation = r["error"]["data"]["correlation_id"]
            .as_str()
            .or(r["result"]["structuredContent"]["correlation_id"].as_str())
            .unwrap_or_else(|| panic!("{tool}: no correlation id: {r}"))
            .to_string();
        assert!(correlation.starts_with("req-"));
        let rows = audit(&s, &api.api, &format!("correlation_id={correlation}"));
        assert_eq!(rows.len(), 1, "{tool}: one row for {correlation}");
        assert_eq!(rows[0]["result"], result, "{tool}: {}", rows[0]);
        assert_eq!(rows[0]["action"], format!("mcp.{tool}"));
    }
    let r = request(
        s.addr,
        "POST",
        &[("Authorization", "Bearer tg_wrong")],
        Some(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
    );
    assert_eq!(r.status, 401);
    assert!(!audit(&s, &api.api, "action=auth.failure").is_empty(), "authentication failures are audited");
    let r = s.rpc(&[], json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "query_audit_log", "arguments": {"action": "mcp.set_plugin_config", "limit": 5}}})).json();
    assert_eq!(r["result"]["structuredContent"]["entries"][0]["result"], "denied", "query_audit_log reads them: {r}");
}

#[test]
fn token_self_service() {
    let s = start(&[]);
    let admin = s.token.clone();
    let listed = call_as(&s, &admin, "list_api_tokens", json!({})).json();
    let mine = listed["result"]["structuredContent"]["tokens"][0]["token_id"].as_str().unwrap().to_string();
    let rotated = call_as(&s, &admin, "rotate_api_token", json!({"token_id": mine, "overlap_days": 1})).json();
    let out = &rotated["result"]["structuredContent"];
    assert_eq!(out["tier"], "operator", "the successor inherits the tier: {rotated}");
    let (successor, secret) =
        (out["successor_id"].as_str().unwrap().to_string(), out["secret"].as_str().unwrap().to_string());
    let confirmed =
        call_as(&s, &secret, "confirm_api_token_rotation", json!({"token_id": successor, "secret": secret})).json();
    assert_eq!(confirmed["result"]["structuredContent"]["revoked_predecessor_id"], mine, "{confirmed}");
    let r = call_as(&s, &admin, "get_tags", json!({"agent_id": "a"}));
    assert_eq!(r.status, 401, "the predecessor no longer works");
    let check = call_as(&s, &secret, "check_permission", json!({"tool": "delete_tag"})).json();
    let c = &check["result"]["structuredContent"];
    assert_eq!(
        (c["tier_decision"].as_str(), c["needs_approval"].as_bool(), c["rbac_granted"].as_bool()),
        (Some("approval"), Some(true), Some(true))
    );
    let groups = call_as(&s, &secret, "list_management_groups", json!({})).json();
    assert_eq!(groups["result"]["structuredContent"]["groups"][0]["id"], "all");
}

#[test]
fn audit_rows_survive_shutdown() {
    let s = start(&[]);
    let api = reviewer(&s);
    for i in 0..40 {
        call_as(&s, &s.token, "set_plugin_config", json!({"plugin": "p", "key": format!("k{i}"), "value": "v"}));
    }
    // SIGTERM right away: the writer drains before the process exits.
    let s = common::start_in(s.stop(), &[]);
    let rows = s.http("GET", "/api/v1/audit?action=mcp.set_plugin_config&limit=1000", Some(&api.api), None).json();
    assert_eq!(rows["entries"].as_array().map(Vec::len), Some(40), "every row of the 40 denied calls is kept");
}

#[test]
fn the_approval_api_refuses_clearly() {
    let s = start(&[]);
    let api = reviewer(&s);
    assert_eq!(s.http("GET", "/api/v1/approvals", None, None).status, 401);
    assert_eq!(s.http("GET", "/api/v1/approvals", Some(&s.token), None).json()["error"], "mcp_token");
    assert_eq!(s.http("GET", "/api/v1/approvals/0000", Some(&api.api), None).status, 404);
    assert_eq!(s.http("POST", "/api/v1/approvals/0000/approve", Some(&api.api), Some("{}")).status, 403);
    assert_eq!(common::console::approve(&s, &api, "0000").status, 404);
    for query in ["limit=0", "limit=1001", "since=yesterday"] {
        let r = s.http("GET", &format!("/api/v1/audit?{query}"), Some(&api.api), None);
        assert_eq!((r.status, r.json()["error"].as_str()), (400, Some("bad_query")), "{query}");
    }
    s.cli(&["principal", "add", "carol", "--role", "Viewer"]);
    let out = std::process::Command::new(common::bin())
        .args(["token", "create", "--principal", "carol", "--api", "--data-dir"])
        .arg(s.data_dir.path())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("Approval:Write"), "only reviewers get API credentials");
    let r = common::request_to(
        s.addr,
        "GET",
        "/api/v1/approvals",
        &[("Authorization", &format!("Bearer {}", api.api)), ("Origin", "https://evil.example.com")],
        None,
    );
    assert_eq!(r.status, 403, "DNS-rebinding protection covers the API too");
}

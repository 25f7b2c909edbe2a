//! `/api/v1/tokens`, the REST twin of list_api_tokens, create_api_token and revoke_api_token:
//! an API credential only (never an MCP token), self-scoped, the tool's own rules, and a
//! supervised-tier mint that takes a fresh second factor or a person's approval of a ticket
//! only this route redeems.

use crate::common;

use common::console::{approve, code, reviewer};
use common::{Server, call_as, request_to, start};
use serde_json::{Value, json};

fn send(
    s: &Server,
    method: &str,
    path: &str,
    credential: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> common::Response {
    let auth = format!("Bearer {credential}");
    let mut all = vec![("Authorization", auth.as_str())];
    all.extend_from_slice(headers);
    request_to(s.addr, method, path, &all, body.map(|b| b.to_string()).as_deref())
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

#[test]
fn automation_lists_mints_and_revokes_its_own_tokens_over_rest() {
    let s = start(&[]);
    let ci = reviewer(&s, "ci");
    // An MCP token is refused, whoever holds it.
    let r = send(&s, "GET", "/api/v1/tokens", &s.token, &[], None);
    assert_eq!((r.status, r.json()["error"].as_str()), (403, Some("mcp_token")), "{r:?}");
    // Self-scoped: ci sees its own credential, not admin's demo token.
    let listed = send(&s, "GET", "/api/v1/tokens", &ci.api, &[], None).json();
    assert_eq!(listed["count"], 1, "{listed}");
    assert_eq!(listed["tokens"][0]["tier"], Value::Null, "its own API credential: {listed}");
    // An operator-tier token: the credential alone mints it; it works for MCP at once.
    let body = json!({"name": "nightly", "mcp_tier": "operator", "expires_at": now() + 30 * 86_400});
    let made = send(&s, "POST", "/api/v1/tokens", &ci.api, &[], Some(body));
    assert_eq!(made.status, 201, "{made:?}");
    let made = made.json();
    let secret = made["secret"].as_str().unwrap();
    assert_eq!(call_as(&s, secret, "list_api_tokens", json!({})).json()["result"]["isError"], false);
    // The tool's rules: at most 90 days, a declared tier, nothing unknown.
    for (body, says) in [
        (json!({"name": "x", "mcp_tier": "operator", "expires_at": now() + 91 * 86_400}), "90 days"),
        (json!({"name": "x", "mcp_tier": "root", "expires_at": now() + 60}), "mcp_tier"),
        (json!({"name": "x", "mcp_tier": "operator"}), "expires_at"),
        (json!({"name": "x", "mcp_tier": "operator", "expires_at": now() + 60, "owner": "admin"}), "owner"),
    ] {
        let r = send(&s, "POST", "/api/v1/tokens", &ci.api, &[], Some(body.clone()));
        assert_eq!(r.status, 400, "{body}: {r:?}");
        assert!(r.body.contains(says), "{body}: {}", r.body);
    }
    // Revoked: the token stops working; another principal's token reads as unknown.
    let id = made["token_id"].as_str().unwrap();
    let revoked = send(&s, "DELETE", &format!("/api/v1/tokens/{id}"), &ci.api, &[], None);
    assert_eq!((revoked.status, revoked.json()["revoked"].clone()), (200, json!(true)), "{revoked:?}");
    assert_eq!(call_as(&s, secret, "list_api_tokens", json!({})).status, 401);
    let admins = call_as(&s, &s.token, "list_api_tokens", json!({})).json();
    let demo = admins["result"]["structuredContent"]["tokens"][0]["token_id"].as_str().unwrap().to_string();
    assert_eq!(send(&s, "DELETE", &format!("/api/v1/tokens/{demo}"), &ci.api, &[], None).status, 404);
}

#[test]
fn a_supervised_token_takes_a_fresh_second_factor_or_a_persons_approval() {
    let s = start(&[]);
    let ci = reviewer(&s, "ci");
    let boss = reviewer(&s, "boss");
    let body = json!({"name": "deploy", "mcp_tier": "supervised", "expires_at": now() + 7 * 86_400});
    // A wrong code is refused; a fresh one mints at once.
    let wrong =
        send(&s, "POST", "/api/v1/tokens", &ci.api, &[("X-Toolgate-Second-Factor", "000000")], Some(body.clone()));
    assert_eq!((wrong.status, wrong.json()["error"].as_str()), (401, Some("second_factor_refused")), "{wrong:?}");
    let fresh = code(&ci.secret, "ci", 1);
    let made = send(&s, "POST", "/api/v1/tokens", &ci.api, &[("X-Toolgate-Second-Factor", &fresh)], Some(body.clone()));
    assert_eq!((made.status, made.json()["tier"].clone()), (201, json!("supervised")), "{made:?}");
    // Without one: a ticket, which a person approves, and the same POST with its id redeems once.
    let pending = send(&s, "POST", "/api/v1/tokens", &ci.api, &[], Some(body.clone()));
    assert_eq!(pending.status, 202, "{pending:?}");
    let approval_id = pending.json()["approval_id"].as_str().unwrap().to_string();
    assert_eq!(approve(&s, &boss, &approval_id).status, 200);
    // A tool call never redeems a ticket minted here (and leaves it unconsumed).
    let supervised = s.token("ci", "supervised", "1d");
    let mut mcp_args = body.clone();
    mcp_args["approval_id"] = json!(approval_id);
    assert_eq!(call_as(&s, &supervised, "create_api_token", mcp_args).error_code(), -32003);
    let mut recall = body.clone();
    recall["approval_id"] = json!(approval_id);
    let redeemed = send(&s, "POST", "/api/v1/tokens", &ci.api, &[], Some(recall.clone()));
    assert_eq!(redeemed.status, 201, "{redeemed:?}");
    let replay = send(&s, "POST", "/api/v1/tokens", &ci.api, &[], Some(recall));
    assert_eq!((replay.status, replay.json()["error"].as_str()), (403, Some("approval_refused")), "{replay:?}");
    // Each mint is audited with how it was assured.
    let audit = send(&s, "GET", "/api/v1/audit?action=rest.create_api_token&limit=20", &boss.api, &[], None).json();
    let details: Vec<&str> = audit["entries"].as_array().unwrap().iter().filter_map(|e| e["detail"].as_str()).collect();
    assert!(details.iter().any(|d| d.contains("a fresh second-factor code")), "{details:?}");
    assert!(details.iter().any(|d| d.contains("approval by boss")), "{details:?}");
}

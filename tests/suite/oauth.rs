//! The MCP endpoint as an OAuth 2.1 resource server (docs/sign-in.md), against the real binary
//! and an issuer the test runs over real HTTP: a person's access token calls tools as that
//! person, with the tier its scope selects and the roles their groups bring; every bad token
//! is a 401 naming where to sign in; a tier too small is the step-up 403; an issuer that
//! cannot be reached is a 503, never a pass.

use crate::common;

use common::issuer::{Issuer, free_port, settings, sign_with, unsigned};
use common::{Response, Server, request};
use serde_json::{Value, json};

fn with_settings(text: &str, port: u16, extra: &[&str]) -> Server {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("toolgate.yaml"), text).unwrap();
    let listen = format!("127.0.0.1:{port}");
    let mut args = vec!["--listen", listen.as_str()];
    args.extend_from_slice(extra);
    common::start_in(dir, &args)
}

const MAPPING: &str = "  group_roles:\n    - {idp_group: fleet-viewers, role: Viewer}\n    - {idp_group: fleet-ops, role: Operator}\n    - {idp_group: fleet-admins, role: Administrator}\n";

fn call_with(s: &Server, token: &str, name: &str, arguments: Value) -> Response {
    common::call_as(s, token, name, arguments)
}

fn challenge(r: &Response) -> String {
    r.header("www-authenticate").unwrap_or_else(|| panic!("no challenge: {r:?}")).to_string()
}

#[test]
fn a_persons_token_calls_tools_as_them_with_their_groups_roles() {
    let issuer = Issuer::start();
    let port = free_port();
    let s = with_settings(&settings(port, &issuer.url, "", MAPPING), port, &[]);
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let mut claims = issuer.claims("u-ana", &resource, "openid toolgate:readonly");
    claims["groups"] = json!(["fleet-viewers", "unmapped"]);
    claims["preferred_username"] = json!("ana");
    claims["email"] = json!("ana@example.com");
    claims["name"] = json!("Ana Example");
    let token = issuer.sign(&claims);
    let r = call_with(&s, &token, "list_agents", json!({}));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["result"]["isError"], false, "{r:?}");
    let listed = s.cli(&["principal", "list"]);
    let ana = listed.lines().find(|l| l.starts_with("ana ")).unwrap_or_else(|| panic!("{listed}"));
    assert!(ana.contains(&format!("u-ana at {} (ana@example.com)", issuer.url)), "{ana}");
    assert!(!ana.contains("Viewer"), "the group's role is not stored as hers: {ana}");
    // The audit log names the person.
    let admin = common::api_credential(&s, "auditor");
    let rows = s.http("GET", "/api/v1/audit?principal=ana", Some(&admin), None).json();
    let actions: Vec<&str> =
        rows["entries"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert!(actions.contains(&"principal.provisioned") && actions.contains(&"mcp.list_agents"), "{rows}");
    // An access review lists the role her IdP group brings as such; flagging it says to change
    // it at the IdP.
    let mut rhea = issuer.claims("u-rhea", &resource, "toolgate:supervised");
    rhea["groups"] = json!(["fleet-admins"]);
    rhea["preferred_username"] = json!("rhea");
    let rhea = issuer.sign(&rhea);
    let opened = call_with(&s, &rhea, "open_access_review", json!({"title": "Q4"})).json();
    let campaign =
        opened["result"]["structuredContent"]["campaign_id"].as_str().unwrap_or_else(|| panic!("{opened}")).to_string();
    let review = call_with(&s, &rhea, "get_access_review", json!({"campaign_id": campaign})).json();
    let grants = review["result"]["structuredContent"]["grants"].as_array().unwrap().clone();
    let hers = grants
        .iter()
        .find(|g| g["principal_type"] == "idp" && g["principal_id"] == "ana")
        .unwrap_or_else(|| panic!("{review}"));
    assert_eq!(hers["role_name"], "Viewer");
    assert_eq!(hers["source"], format!("group(s) fleet-viewers at {}", issuer.url));
    let flag = json!({"campaign_id": campaign, "principal_type": "idp", "principal_id": "ana", "role_name": "Viewer",
                      "decision": "flagged_revoke", "justification": "left the team"});
    let flagged = call_with(&s, &rhea, "record_attestation", flag).json();
    let remediation =
        flagged["result"]["structuredContent"]["remediation"].as_str().unwrap_or_else(|| panic!("{flagged}"));
    assert!(remediation.contains("remove them from that group there"), "{remediation}");
    // (Closing, which leaves such a flag to the IdP, is the store suite's: rhea may not decide
    // her own grants, so she alone cannot close this one.)
    // Without the group, she holds no role: the same call is refused by RBAC (-32003).
    claims["groups"] = json!([]);
    claims["jti"] = json!("another");
    let r = call_with(&s, &issuer.sign(&claims), "list_agents", json!({}));
    assert_eq!(r.error_code(), -32003, "{r:?}");
}

#[test]
fn every_bad_token_is_a_401_that_names_where_to_sign_in() {
    let issuer = Issuer::start();
    let port = free_port();
    let s = with_settings(&settings(port, &issuer.url, "      leeway: 30s\n", MAPPING), port, &[]);
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let good = || {
        let mut c = issuer.claims("u-bob", &resource, "toolgate:readonly");
        c["groups"] = json!(["fleet-viewers"]);
        c
    };
    let now = good()["iat"].as_i64().unwrap();
    let with = |key: &str, value: Value| {
        let mut c = good();
        c[key] = value;
        issuer.sign(&c)
    };
    let bad: Vec<(&str, String)> = vec![
        ("a forged signature", sign_with(&issuer.forger, &good())),
        ("alg none", unsigned(&good())),
        ("another issuer", with("iss", json!("https://evil.example"))),
        ("another audience", with("aud", json!("https://other.example/mcp"))),
        ("expired past the leeway", with("exp", json!(now - 31))),
        // Past the 30 s leeway by more than the second the server's clock may be ahead.
        ("not valid yet past the leeway", with("nbf", json!(now + 45))),
        ("living longer than accepted", with("exp", json!(now + 7200))),
        ("no subject", with("sub", json!(""))),
        ("huge", format!("{}.{}.x", "e".repeat(10), "a".repeat(20_000))),
        ("not a JWT", "opaque-token-from-somewhere".to_string()),
    ];
    for (what, token) in &bad {
        let r = call_with(&s, token, "list_agents", json!({}));
        assert_eq!(r.status, 401, "{what}: {r:?}");
        let c = challenge(&r);
        assert!(c.contains(r#"error="invalid_token""#), "{what}: {c}");
        assert!(
            c.contains(&format!(
                r#"resource_metadata="http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp""#
            )),
            "{what}: {c}"
        );
        assert!(c.contains(r#"scope="toolgate:readonly""#), "{what}: {c}");
    }
    // Clock skew within the leeway passes.
    let r = call_with(&s, &with("exp", json!(now - 20)), "list_agents", json!({}));
    assert_eq!(r.json()["result"]["isError"], false, "expired 20 s ago, leeway 30 s: {r:?}");
    // No tier scope at all: valid, but too small (the step-up 403).
    let r = call_with(&s, &with("scope", json!("openid profile")), "list_agents", json!({}));
    assert_eq!(r.status, 403, "{r:?}");
    assert!(challenge(&r).contains(r#"error="insufficient_scope""#), "{r:?}");
    // The refusals are counted by reason.
    let admin = common::api_credential(&s, "metrics-reader");
    let metrics = s.http("GET", "/metrics", Some(&admin), None).body;
    for reason in
        ["signature", "algorithm", "issuer", "audience", "expired", "not_yet_valid", "lifetime", "too_large", "no_tier"]
    {
        assert!(
            metrics.contains(&format!("toolgate_access_tokens_refused_total{{reason=\"{reason}\"}}")),
            "{reason}:\n{metrics}"
        );
    }
}

#[test]
fn a_tier_too_small_is_the_step_up_403_and_static_tokens_keep_32004() {
    let issuer = Issuer::start();
    let port = free_port();
    let s = with_settings(&settings(port, &issuer.url, "", MAPPING), port, &[]);
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let mut claims = issuer.claims("u-cy", &resource, "toolgate:readonly");
    claims["groups"] = json!(["fleet-ops"]);
    let args = json!({"agent_id": "agt-0000000000000000", "key": "env", "value": "prod"});
    let r = call_with(&s, &issuer.sign(&claims), "set_tag", args.clone());
    assert_eq!(r.status, 403, "{r:?}");
    let c = challenge(&r);
    assert!(c.contains(r#"error="insufficient_scope""#) && c.contains(r#"scope="toolgate:operator""#), "{c}");
    assert!(r.json()["message"].as_str().unwrap().contains("set_tag needs Tag:Write"), "{r:?}");
    // The scope it names lets the call through to the gate and the handler.
    claims["scope"] = json!("toolgate:operator");
    let r = call_with(&s, &issuer.sign(&claims), "set_tag", args.clone());
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.json()["result"]["content"].to_string().contains("agt-0000000000000000"), "the handler ran: {r:?}");
    // Issue 43, 18: a client stepping up asks for the union of the scopes it held and the one
    // the 403 named; such a token was refused as carrying several tiers. It gets the highest.
    claims["scope"] = json!("toolgate:readonly toolgate:operator");
    claims["jti"] = json!("stepped-up");
    let r = call_with(&s, &issuer.sign(&claims), "set_tag", args.clone());
    let handled =
        |r: &Response| r.status == 200 && r.json()["result"]["content"].to_string().contains("agt-0000000000000000");
    assert!(handled(&r), "the union selects operator, and the handler runs: {r:?}");
    // Issue 43, 17: Okta and Entra put scopes in `scp`, an array or a space-separated string,
    // and no `scope`: every such token found no tier. Both are read by default.
    claims.as_object_mut().unwrap().remove("scope");
    for (issuer_style, scp) in [("Okta", json!(["toolgate:operator"])), ("Entra", json!("openid toolgate:operator"))] {
        claims["scp"] = scp;
        claims["jti"] = json!(issuer_style);
        let r = call_with(&s, &issuer.sign(&claims), "set_tag", args.clone());
        assert!(handled(&r), "{issuer_style}: {r:?}");
    }
    claims.as_object_mut().unwrap().remove("scp");
    // Signed in through the identity provider, a person still cannot approve over MCP: that
    // stays a console act, whatever the scope and the groups.
    claims["scope"] = json!("toolgate:supervised");
    claims["groups"] = json!(["fleet-admins"]);
    let r = call_with(&s, &issuer.sign(&claims), "approve_request", json!({"approval_id": "apr-1"}));
    assert_eq!(r.error_code(), -32003, "{r:?}");
    assert!(r.body.contains("approver_assurance_required:non_interactive_session"), "{r:?}");
    // A tg_ token of a tier that does not allow it: the JSON-RPC refusal, as before.
    let readonly = s.token("admin", "readonly", "1h");
    assert_eq!(call_with(&s, &readonly, "set_tag", args).error_code(), -32004);
}

#[test]
fn the_resource_metadata_and_the_401_challenge_say_where_to_sign_in() {
    let issuer = Issuer::start();
    let port = free_port();
    let s = with_settings(&settings(port, &issuer.url, "", MAPPING), port, &[]);
    for path in ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"] {
        let r = s.http("GET", path, None, None);
        assert_eq!(r.status, 200, "{path}: {r:?}");
        let m = r.json();
        assert_eq!(m["resource"], format!("http://127.0.0.1:{port}/mcp"));
        assert_eq!(m["authorization_servers"], json!([issuer.url]));
        assert_eq!(m["scopes_supported"], json!(["toolgate:readonly", "toolgate:operator", "toolgate:supervised"]));
    }
    let r = request(s.addr, "POST", &[], Some(&common::call("list_agents", json!({})).to_string()));
    assert_eq!(r.status, 401);
    let c = challenge(&r);
    assert!(c.contains("resource_metadata=") && c.contains(r#"scope="toolgate:readonly""#), "{c}");
    assert!(!c.contains("error="), "no token is no error (RFC 6750 §3.1): {c}");
    // The REST API's 401 says the same.
    let c = challenge(&s.http("GET", "/api/v1/approvals", Some("tg_unknown"), None));
    assert!(c.contains("resource_metadata=") && c.contains(r#"error="invalid_token""#), "{c}");
    // A server without sign-in has no metadata and its usual challenge.
    let plain = common::start(&[]);
    assert_eq!(plain.http("GET", "/.well-known/oauth-protected-resource/mcp", None, None).status, 404);
    let c = challenge(&request(plain.addr, "POST", &[], Some("{}")));
    assert!(!c.contains("resource_metadata"), "{c}");
}

#[test]
fn an_issuer_that_cannot_be_reached_is_a_503_never_a_pass() {
    let port = free_port();
    let nowhere = format!("http://127.0.0.1:{}", free_port());
    let s = with_settings(&settings(port, &nowhere, "", ""), port, &[]);
    let issuer = Issuer::start();
    // Signed by a key the server cannot fetch, and naming the unreachable issuer.
    let mut claims = issuer.claims("u-dee", &format!("http://127.0.0.1:{port}/mcp"), "toolgate:readonly");
    claims["iss"] = json!(nowhere);
    let r = call_with(&s, &issuer.sign(&claims), "list_agents", json!({}));
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(r.json()["error"], "issuer_unavailable");
    assert!(r.json()["message"].as_str().unwrap().contains("no metadata for issuer"), "{r:?}");
    // An issuer found, but its key set unreachable: 503 too.
    let port = free_port();
    let keys_nowhere = format!("      jwks_uri: http://127.0.0.1:{}/jwks\n", free_port());
    let s = with_settings(&settings(port, &issuer.url, &keys_nowhere, ""), port, &[]);
    let claims = issuer.claims("u-dee", &format!("http://127.0.0.1:{port}/mcp"), "toolgate:readonly");
    let r = call_with(&s, &issuer.sign(&claims), "list_agents", json!({}));
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.json()["message"].as_str().unwrap().contains("key set could not be fetched"), "{r:?}");
}

#[test]
fn a_pre_provisioned_deployment_lets_in_only_linked_people() {
    let issuer = Issuer::start();
    let port = free_port();
    let s = with_settings(&settings(port, &issuer.url, "      provisioning: pre_provisioned\n", MAPPING), port, &[]);
    let mut claims = issuer.claims("u-eve", &format!("http://127.0.0.1:{port}/mcp"), "toolgate:readonly");
    claims["groups"] = json!(["fleet-viewers"]);
    let r = call_with(&s, &issuer.sign(&claims), "list_agents", json!({}));
    assert_eq!(r.status, 403, "{r:?}");
    assert!(r.json()["message"].as_str().unwrap().contains("toolgate principal link NAME"), "{r:?}");
    assert!(!s.cli(&["principal", "list"]).contains("u-eve"), "nobody was made");
    s.cli(&["principal", "add", "eve"]);
    s.cli(&["principal", "link", "eve", "--issuer", &issuer.url, "--subject", "u-eve"]);
    claims["jti"] = json!("second");
    let r = call_with(&s, &issuer.sign(&claims), "list_agents", json!({}));
    assert_eq!(r.json()["result"]["isError"], false, "{r:?}");
    let out = s.cli_output(&["principal", "link", "nobody", "--issuer", &issuer.url, "--subject", "u-x"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("there is no principal `nobody`"), "{out:?}");
}

/// Issue 43, MEDIUM 7: after `toolgate principal remove`, the same access token kept working
/// and just-in-time provisioning made the principal again, with its group roles. Removal now
/// blocks the IdP subject (by issuer and subject) until an administrator re-admits it, as fast
/// as for `tg_` tokens (the credential cache's second).
#[test]
fn a_removed_person_stays_out_until_re_admitted() {
    let issuer = Issuer::start();
    let port = free_port();
    let s = with_settings(&settings(port, &issuer.url, "", MAPPING), port, &["--auth-cache-ttl-ms", "200"]);
    let mut claims = issuer.claims("u-rob", &format!("http://127.0.0.1:{port}/mcp"), "toolgate:readonly");
    claims["groups"] = json!(["fleet-viewers"]);
    claims["preferred_username"] = json!("rob");
    let token = issuer.sign(&claims);
    assert_eq!(call_with(&s, &token, "list_agents", json!({})).json()["result"]["isError"], false);
    let removed = s.cli(&["principal", "remove", "rob"]);
    assert!(removed.contains("may not sign in again until `toolgate principal readmit"), "{removed}");
    std::thread::sleep(std::time::Duration::from_millis(400));
    claims["jti"] = json!("a-new-one");
    for token in [token, issuer.sign(&claims)] {
        let r = call_with(&s, &token, "list_agents", json!({}));
        assert_eq!(r.status, 401, "{r:?}");
        assert!(r.json()["message"].as_str().unwrap().contains("toolgate principal readmit"), "{r:?}");
    }
    assert!(!s.cli(&["principal", "list"]).contains("u-rob"), "nobody was made again");
    let readmitted = s.cli(&["principal", "readmit", "--issuer", &issuer.url, "--subject", "u-rob"]);
    assert!(readmitted.contains("may sign in again"), "{readmitted}");
    claims["jti"] = json!("after");
    let r = call_with(&s, &issuer.sign(&claims), "list_agents", json!({}));
    assert_eq!(r.json()["result"]["isError"], false, "made again, as a new person: {r:?}");
    let again = s.cli_output(&["principal", "readmit", "--issuer", &issuer.url, "--subject", "u-rob"]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("is not blocked"), "{again:?}");
}

/// `toolgate serve` on `data` with the settings file `path`, to its end (a bad file ends it).
fn serve_with_settings(data: &std::path::Path, path: &std::path::Path) -> std::process::Output {
    std::process::Command::new(common::bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .arg("--config")
        .arg(path)
        .output()
        .unwrap()
}

#[test]
fn a_bad_settings_file_stops_the_server_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.yaml");
    std::fs::write(&path, "public_url: http://fleet.example.com\noauth:\n  issuers:\n    - issuer: https://idp.example\n  group_roles:\n    - {idp_group: a, role: Root}\n").unwrap();
    let out = serve_with_settings(dir.path(), &path);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("public_url: `http://fleet.example.com` must be https"), "{err}");
    assert!(err.contains("--> ") && err.contains("settings.yaml:1:13"), "{err}");
    assert!(err.contains("role `Root` is not declared") && err.contains("settings.yaml:6:28"), "{err}");
    // A management group the store does not have is named at its line too.
    std::fs::write(&path, "public_url: http://127.0.0.1:9\noauth:\n  issuers:\n    - issuer: https://idp.example\n  group_roles:\n    - {idp_group: a, role: Viewer, management_group: grp-missing}\n").unwrap();
    let out = serve_with_settings(dir.path(), &path);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no management group `grp-missing`") && err.contains("settings.yaml:6:54"), "{err}");
}

#[test]
fn the_consoles_sign_in_is_bound_to_its_browser_and_used_once() {
    let issuer = Issuer::start();
    let port = free_port();
    let console = "      console:\n        client_id: toolgate-console\n";
    let s = with_settings(&settings(port, &issuer.url, console, MAPPING), port, &[]);
    let page = s.http("GET", "/console/sign-in", None, None);
    assert!(
        page.body.contains("Sign in with your organisation's account") && page.body.contains(&issuer.url),
        "{page:?}"
    );
    let begun = s.http("GET", "/console/oidc/start", None, None);
    assert_eq!(begun.status, 303, "{begun:?}");
    let to = url::Url::parse(begun.header("location").unwrap()).unwrap();
    assert_eq!(to.as_str().split('?').next().unwrap(), format!("{}/authorize", issuer.url));
    let query: std::collections::HashMap<String, String> = to.query_pairs().into_owned().collect();
    assert_eq!(query["response_type"], "code");
    assert_eq!(query["client_id"], "toolgate-console");
    assert_eq!(query["redirect_uri"], format!("http://127.0.0.1:{port}/console/oidc/callback"));
    assert_eq!(query["code_challenge_method"], "S256");
    assert!(query["scope"].split(' ').any(|s| s == "openid"), "{query:?}");
    assert!(!query.contains_key("prompt"), "a sign-in asks for no fresh login: {query:?}");
    let (state, nonce) = (&query["state"], &query["nonce"]);
    assert!(state.len() >= 32 && nonce.len() >= 32 && state != nonce);
    let binding = begun.header("set-cookie").unwrap().to_string();
    assert!(
        binding.starts_with("toolgate_oidc=") && binding.contains("SameSite=Lax") && binding.contains("HttpOnly"),
        "{binding}"
    );
    let cookie = binding.split(';').next().unwrap().to_string();
    let get = |path: &str, cookie: Option<&str>| {
        let headers: Vec<(&str, &str)> = cookie.map(|c| vec![("Cookie", c)]).unwrap_or_default();
        common::request_to(s.addr, "GET", path, &headers, None)
    };
    let r = get("/console/oidc/callback?code=x&state=forged", Some(&cookie));
    assert_eq!(r.status, 400, "an unknown state: {r:?}");
    assert!(r.body.contains("expired or was used"), "{r:?}");
    let r = get(&format!("/console/oidc/callback?code=x&state={state}"), Some("toolgate_oidc=someone-elses"));
    assert_eq!(r.status, 401, "another browser's cookie: {r:?}");
    assert!(r.body.contains("begun in another browser"), "{r:?}");
    let r = get(&format!("/console/oidc/callback?code=x&state={state}"), Some(&cookie));
    assert_eq!(r.status, 400, "a state is taken once, even by a refused callback: {r:?}");
    // A fresh sign-in the IdP refused says why.
    let begun = s.http("GET", "/console/oidc/start", None, None);
    let to = url::Url::parse(begun.header("location").unwrap()).unwrap();
    let state = to.query_pairs().find(|(k, _)| k == "state").unwrap().1.to_string();
    let cookie = begun.header("set-cookie").unwrap().split(';').next().unwrap().to_string();
    let r =
        get(&format!("/console/oidc/callback?error=access_denied&error_description=no&state={state}"), Some(&cookie));
    assert_eq!(r.status, 401, "{r:?}");
    assert!(r.body.contains("refused the sign-in: access_denied"), "{r:?}");
    let admin = common::api_credential(&s, "metrics-reader");
    let metrics = s.http("GET", "/metrics", Some(&admin), None).body;
    for reason in ["foreign_browser", "idp_refused"] {
        assert!(
            metrics.contains(&format!("toolgate_console_idp_refusals_total{{reason=\"{reason}\"}} 1")),
            "{reason}:\n{metrics}"
        );
    }
    // A step-up needs a session signed in through the IdP.
    assert_eq!(s.http("GET", "/console/oidc/start?step_up=1", None, None).header("location"), Some("/console/sign-in"));
}

#[test]
fn an_opaque_token_is_checked_by_the_issuers_introspection() {
    let issuer = Issuer::start();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("introspection-secret");
    std::fs::write(&secret, "rs-secret\n").unwrap();
    let extra = format!(
        "      introspection:\n        client_id: rs-client\n        client_secret_file: {}\n",
        secret.display()
    );
    let s = with_settings(&settings(port, &issuer.url, &extra, MAPPING), port, &[]);
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let mut answer = issuer.claims("u-opal", &resource, "toolgate:readonly");
    answer["active"] = json!(true);
    answer["groups"] = json!(["fleet-viewers"]);
    answer["username"] = json!("opal");
    issuer.know_opaque("opaque-good", answer.clone());
    let r = call_with(&s, "opaque-good", "list_agents", json!({}));
    assert_eq!(r.json()["result"]["isError"], false, "an active token for this resource: {r:?}");
    let mut other = answer.clone();
    other["aud"] = json!(["https://other.example/mcp"]);
    issuer.know_opaque("opaque-other", other);
    let mut expired = answer.clone();
    expired["exp"] = json!(answer["iat"].as_i64().unwrap() - 120);
    expired["iat"] = json!(answer["iat"].as_i64().unwrap() - 600);
    issuer.know_opaque("opaque-expired", expired);
    for (token, why) in
        [("opaque-unknown", "not active"), ("opaque-other", "another audience"), ("opaque-expired", "expired")]
    {
        let r = call_with(&s, token, "list_agents", json!({}));
        assert_eq!(r.status, 401, "{token}: {r:?}");
        assert!(r.body.contains(why), "{token}: {r:?}");
    }
    // Introspection that refuses this server's own credentials is a misconfiguration: 503.
    std::fs::write(&secret, "wrong-secret\n").unwrap();
    let port = free_port();
    let s = with_settings(&settings(port, &issuer.url, &extra, MAPPING), port, &[]);
    let r = call_with(&s, "opaque-good", "list_agents", json!({}));
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.body.contains("introspection") && r.body.contains("401"), "{r:?}");
}

/// An OAuth client's default toolsets come from the deployment settings (docs/toolsets.md):
/// the token's `client_id`, or else `azp`, picks them; any other client gets its tier's.
#[test]
fn an_oauth_clients_toolsets_come_from_the_deployment_settings() {
    let issuer = Issuer::start();
    let port = free_port();
    let chosen = format!("{MAPPING}  client_toolsets:\n    - {{client_id: claude, toolsets: \"oversight\"}}\n");
    let s = with_settings(&settings(port, &issuer.url, "", &chosen), port, &[]);
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let listed = |claim: &str, client: &str| {
        let mut claims = issuer.claims("u-ana", &resource, "openid toolgate:readonly");
        claims[claim] = json!(client);
        let auth = format!("Bearer {}", issuer.sign(&claims));
        let r = request(
            s.addr,
            "POST",
            &[("Authorization", &auth)],
            Some(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#),
        );
        let tools = r.json()["result"]["tools"].as_array().cloned().unwrap_or_else(|| panic!("{r:?}"));
        tools.iter().map(|t| t["name"].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    let claude = listed("client_id", "claude");
    assert!(
        claude.contains(&"query_audit_log".to_string()) && !claude.contains(&"list_agents".to_string()),
        "{claude:?}"
    );
    assert_eq!(listed("azp", "claude"), claude, "azp names the client when client_id is absent");
    let other = listed("client_id", "someone-else");
    assert!(other.contains(&"list_agents".to_string()) && !other.contains(&"query_audit_log".to_string()), "{other:?}");
}

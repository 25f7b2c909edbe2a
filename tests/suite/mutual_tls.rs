//! The agent listener with mutual TLS (docs/trust.md), against the real binary and real agents:
//! three agents enroll over server-authenticated TLS and come back with client certificates;
//! a hello without its certificate is refused while it holds one; one agent's certificate is
//! revoked (with a person's approval) and it is cut off, refused with its old certificate, and
//! still after a restart, and on another replica; an unknown serial is audited apart; a session
//! renews its short-lived certificate by itself, staying online; and a CA rotation moves the
//! agents over to the next generation as they renew, the old one trusted until it is retired.

use crate::common;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::agents::*;
use common::tls::Localhost;
use common::trust::{held, issued, kek_file, mutual_tls_flags, tls_hello, wait_held_other_than, wait_issued};
use common::{Server, call_as, now_ms};
use serde_json::{Value, json};

/// A free loopback address: the agent listener's, kept across a restart.
fn free_address() -> String {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string()
}

/// A server whose agent listener (at `agents`) has a `localhost` pair of its own and a CA;
/// MCP stays plain HTTP.
fn serve(tls: &Localhost, kek: &str, agents: &str, data: Option<tempfile::TempDir>, extra: &[&str]) -> Server {
    let mutual = mutual_tls_flags(tls, kek, agents);
    let flags = [FAST, &mutual.iter().map(String::as_str).collect::<Vec<_>>(), extra].concat();
    match data {
        Some(data) => common::start_in(data, &flags),
        None => common::start(&flags),
    }
}

fn agent_url(s: &Server) -> String {
    format!("https://localhost:{}", s.agents.port())
}

fn spawn(s: &Server, tls: &Localhost, token: Option<&str>, state_dir: &Path, hostname: &str) -> Agent {
    spawn_agent_with_logs_to(&agent_url(s), Some(&tls.ca), token, state_dir, hostname, "true")
}

/// The audit rows of `action` (as the administrator).
fn audit_rows(s: &Server, token: &str, action: &str) -> Vec<Value> {
    let answer = call_as(s, token, "query_audit_log", json!({"action": action})).json();
    answer["result"]["structuredContent"]["entries"].as_array().cloned().unwrap_or_default()
}

fn refusal_code(answer: &Value) -> &str {
    assert_eq!(answer["type"], "refused", "{answer}");
    answer["code"].as_str().unwrap()
}

#[test]
fn three_agents_enroll_with_mutual_tls_and_a_revoked_one_is_cut_off_for_good() {
    let tls = Localhost::new();
    let ca_pem = std::fs::read_to_string(&tls.ca).unwrap();
    let keys = tempfile::tempdir().unwrap();
    let kek = kek_file(keys.path());
    let agents_at = free_address();
    let s = serve(&tls, &kek, &agents_at, None, &[]);
    let schemas = output_schemas(&s);
    let states = tempfile::tempdir().unwrap();
    let token = mint(&s, &["--uses", "3"]);
    let names = ["mtls-a", "mtls-b", "mtls-c"];
    let mut agents: Vec<Agent> =
        names.iter().map(|name| spawn(&s, &tls, Some(&token), &states.path().join(name), name)).collect();
    let ids = online_by_hostname(&s, &schemas, 3);
    let listed = wait_issued(&s, 3);
    let serial_of: HashMap<String, String> = listed["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["agent_id"].as_str().unwrap().to_string(), c["serial_hex"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(serial_of.len(), 3, "one certificate each: {listed}");
    assert!(listed["certificates"].as_array().unwrap().iter().all(|c| c["reason"] == "enrollment"), "{listed}");

    // Holding a certificate, an agent may not say hello without it; with it, it may.
    let b_dir = states.path().join("mtls-b");
    let without = tls_hello(s.agents, &ca_pem, &b_dir, None).expect("an answer over TLS");
    assert_eq!(refusal_code(&without), "certificate_required", "{without}");
    let b_held = held(&b_dir);
    let with = tls_hello(s.agents, &ca_pem, &b_dir, Some(&b_held)).expect("a welcome");
    assert_eq!(with["type"], "welcome", "{with}");
    // Another agent's certificate does not open this one's session.
    let c_dir = states.path().join("mtls-c");
    let crossed = tls_hello(s.agents, &ca_pem, &c_dir, Some(&b_held)).expect("an answer");
    assert_eq!(refusal_code(&crossed), "bad_credential", "{crossed}");

    // Revoking needs a person's approval on the supervised tier.
    let rita = common::console::reviewer(&s, "rita");
    let admin = s.token("admin", "supervised", "1d");
    let a_id = &ids["mtls-a"];
    let a_dir = states.path().join("mtls-a");
    let a_held = held(&a_dir);
    let serial = serial_of[a_id].to_uppercase();
    let revoked = common::console::approved_on(
        &s,
        &s,
        &rita,
        &admin,
        "revoke_certificate",
        json!({"serial_hex": serial, "reason": "laptop lost"}),
    );
    assert_eq!(
        (revoked["changed"].as_bool(), revoked["certificate"]["agent_id"].as_str()),
        (Some(true), Some(a_id.as_str()))
    );
    assert_eq!(revoked["certificate"]["revoked"]["reason"], "laptop lost");
    // Cut off: its session closed, the agent told why, and it stops.
    let code = agents[0].wait_for_exit();
    assert_ne!(code, 0, "the revoked agent stops");
    assert!(
        agents[0].log_text().contains("certificate_revoked") || agents[0].log_text().contains("revoked"),
        "{}",
        agents[0].log_text()
    );
    wait_for_status(&s, &schemas, a_id, "offline");
    // With its old certificate, or without one, it is refused as revoked.
    let old = tls_hello(s.agents, &ca_pem, &a_dir, Some(&a_held)).expect("an answer");
    assert_eq!(refusal_code(&old), "certificate_revoked", "{old}");
    let bare = tls_hello(s.agents, &ca_pem, &a_dir, None).expect("an answer");
    assert_eq!(refusal_code(&bare), "certificate_revoked", "{bare}");
    // The others stay online.
    wait_for_status(&s, &schemas, &ids["mtls-b"], "online");
    wait_for_status(&s, &schemas, &ids["mtls-c"], "online");

    // Audited: the revocation, and an unknown serial apart from it (denied, not a failure).
    let unknown = call_as(&s, &admin, "revoke_certificate", json!({"serial_hex": "abcdef"})).json();
    let approval = approval_id_of(&unknown);
    common::agents::approve(&s, &rita, &approval);
    let recalled =
        call_as(&s, &admin, "revoke_certificate", json!({"serial_hex": "abcdef", "approval_id": approval})).json();
    assert_eq!(recalled["result"]["isError"], true, "{recalled}");
    let rows = audit_rows(&s, &admin, "ca.cert.revoked");
    let outcomes: Vec<(&str, &str)> =
        rows.iter().map(|r| (r["result"].as_str().unwrap_or(""), r["target"].as_str().unwrap_or(""))).collect();
    assert!(outcomes.contains(&("success", serial.to_lowercase().as_str())), "{rows:?}");
    assert!(outcomes.contains(&("denied", "abcdef")), "{rows:?}");

    // After a restart the serial is still refused, and the others come back.
    drop(agents.remove(0));
    let s = serve(&tls, &kek, &agents_at, Some(s.stop()), &[]);
    let after = tls_hello(s.agents, &ca_pem, &a_dir, Some(&a_held)).expect("an answer");
    assert_eq!(refusal_code(&after), "certificate_revoked", "still refused after a restart: {after}");
    let b_again = tls_hello(s.agents, &ca_pem, &b_dir, Some(&b_held)).expect("a welcome");
    assert_eq!(b_again["type"], "welcome", "{b_again}");
    let schemas = output_schemas(&s);
    online_by_hostname(&s, &schemas, 2);
    assert_eq!(issued(&s)["certificates"].as_array().unwrap().iter().filter(|c| !c["revoked"].is_null()).count(), 1);
}

fn approval_id_of(answer: &Value) -> String {
    assert_eq!(answer["error"]["code"], -32006, "expected an approval ticket: {answer}");
    answer["error"]["data"]["approval_id"].as_str().unwrap().to_string()
}

#[test]
fn a_session_renews_its_short_lived_certificate_by_itself() {
    let tls = Localhost::new();
    let keys = tempfile::tempdir().unwrap();
    let kek = kek_file(keys.path());
    let s = serve(&tls, &kek, &free_address(), None, &["--agent-cert-lifetime", "10"]);
    let schemas = output_schemas(&s);
    let states = tempfile::tempdir().unwrap();
    let state_dir = states.path().join("renewing");
    let agent = spawn(&s, &tls, Some(&mint(&s, &["--uses", "1"])), &state_dir, "renewing");
    let agent_id = online_by_hostname(&s, &schemas, 1)["renewing"].clone();
    let first = wait_held_other_than(&state_dir, None);
    // Half way through its ten seconds the running agent renews; and again after that, each
    // time before the server would cut the session off at the certificate's expiry.
    let second = wait_held_other_than(&state_dir, first["pem"].as_str());
    let third = wait_held_other_than(&state_dir, second["pem"].as_str());
    assert!(third["not_after_ms"].as_i64() > second["not_after_ms"].as_i64());
    let listed = wait_issued(&s, 3);
    assert_eq!(listed["certificates"][0]["reason"], "renewal", "{listed}");
    // Past the first certificate's expiry the agent is online on its newest one.
    let expired_at = first["not_after_ms"].as_i64().unwrap();
    let deadline = Instant::now() + PATIENCE;
    while now_ms() < expired_at + 1_000 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(200));
    }
    wait_for_status(&s, &schemas, &agent_id, "online");
    let log = agent.log_text();
    assert!(log.contains("renewing the client certificate"), "renewed in time, not cut off at expiry: {log}");
    assert!(!log.contains("certificate of this session expired"), "{log}");
}

/// The generation of the newest certificate of each agent.
fn newest_generations(s: &Server) -> HashMap<String, u64> {
    let mut newest = HashMap::new();
    // Newest first: the first seen of each agent is its newest.
    for c in issued(s)["certificates"].as_array().unwrap() {
        newest.entry(c["agent_id"].as_str().unwrap().to_string()).or_insert(c["ca_generation"].as_u64().unwrap());
    }
    newest
}

#[test]
fn a_ca_rotation_moves_agents_over_as_they_renew() {
    let tls = Localhost::new();
    let ca_pem = std::fs::read_to_string(&tls.ca).unwrap();
    let keys = tempfile::tempdir().unwrap();
    let kek = kek_file(keys.path());
    let agents_at = free_address();
    // Long enough that generation 1's certificates are still valid when it is retired (so they
    // are refused for that, not for expiring: about 12 s to spare); the agents renew half way
    // through, which this test waits for. Real time: the certificates' validity is checked by
    // TLS on both ends against the wall clock, which no test clock moves.
    let lifetime = ["--agent-cert-lifetime", "30"];
    let s = serve(&tls, &kek, &agents_at, None, &lifetime);
    let schemas = output_schemas(&s);
    let states = tempfile::tempdir().unwrap();
    let token = mint(&s, &["--uses", "2"]);
    let agents: Vec<Agent> =
        ["rot-a", "rot-b"].iter().map(|n| spawn(&s, &tls, Some(&token), &states.path().join(n), n)).collect();
    online_by_hostname(&s, &schemas, 2);
    wait_issued(&s, 2);
    let a_dir = states.path().join("rot-a");
    let first_generation = held(&a_dir);

    let rotated = s.cli(&["ca", "rotate", "--kek-file", &kek]);
    assert!(rotated.contains("generation 2 made"), "{rotated}");
    // The agents' certificates of generation 1 are live: it is not retired under them.
    let early = s.cli_output(&["ca", "retire", "--generation", "1", "--kek-file", &kek]);
    let said = String::from_utf8_lossy(&early.stderr);
    assert!(!early.status.success() && said.contains("live certificate"), "{said}");

    // From its next start the server signs with generation 2 and trusts both: the agents come
    // back with their generation-1 certificates and renew into generation 2.
    let s = serve(&tls, &kek, &agents_at, Some(s.stop()), &lifetime);
    let schemas = output_schemas(&s);
    let status = s.cli(&["ca", "status", "--kek-file", &kek]);
    assert!(status.contains("generation 2 (signs)") && status.contains("generation 1 (trusted)"), "{status}");
    let deadline = Instant::now() + PATIENCE;
    while newest_generations(&s).values().filter(|g| **g == 2).count() < 2 {
        assert!(Instant::now() < deadline, "not every agent renewed into generation 2: {}", issued(&s));
        std::thread::sleep(Duration::from_millis(200));
    }
    online_by_hostname(&s, &schemas, 2);
    let renewed = wait_held_other_than(&a_dir, first_generation["pem"].as_str());
    assert!(renewed["ca_pem"].as_str().unwrap().matches("BEGIN CERTIFICATE").count() == 2, "with the cross-signed one");

    // Retired, generation 1 is refused from the next start; the renewed agents stay.
    s.cli(&["ca", "retire", "--generation", "1", "--force", "--kek-file", &kek]);
    let s = serve(&tls, &kek, &agents_at, Some(s.stop()), &lifetime);
    let schemas = output_schemas(&s);
    let valid_for_ms = first_generation["not_after_ms"].as_i64().unwrap() - now_ms();
    assert!(valid_for_ms > 0, "the machine was too slow: the old certificate expired first");
    assert!(tls_hello(s.agents, &ca_pem, &a_dir, Some(&first_generation)).is_err(), "generation 1 is not trusted");
    online_by_hostname(&s, &schemas, 2);
    let status = s.cli(&["ca", "status", "--kek-file", &kek]);
    assert!(!status.contains("generation 1"), "{status}");
    // Frames signed under generation 2 were taken all along by agents that pinned generation
    // 1: through the cross-signed certificate (the quarantine state of every session is one).
    for agent in &agents {
        let log = agent.log_text();
        assert!(log.contains("renewing the client certificate") && !log.contains("refused a frame"), "{log}");
    }
    // The pin followed the rotation: generation 1 vouched for generation 2.
    let pinned = std::fs::read_to_string(a_dir.join("pinned-ca.pem")).unwrap();
    assert!(held(&a_dir)["ca_pem"].as_str().unwrap().starts_with(pinned.trim_end()), "pinned generation 2");
    assert!(!first_generation["ca_pem"].as_str().unwrap().starts_with(pinned.trim_end()));
}

/// Replicas on one PostgreSQL database: a certificate revoked on A cuts off its agent's
/// session on B within B's revocation check, and B refuses it from then on.
#[test]
fn a_certificate_revoked_on_one_replica_is_cut_off_on_the_other() {
    let tls = Localhost::new();
    let ca_pem = std::fs::read_to_string(&tls.ca).unwrap();
    let keys = tempfile::tempdir().unwrap();
    let kek = kek_file(keys.path());
    let mutual = mutual_tls_flags(&tls, &kek, "127.0.0.1:0");
    let extra: Vec<&str> = mutual.iter().map(String::as_str).collect();
    let database = common::replicas::fresh_database("mtls_revocation");
    let (a, b) = common::replicas::replicas(&database, &extra);
    let states = tempfile::tempdir().unwrap();
    let state_dir = states.path().join("on-b");
    let mut agent = spawn(&b, &tls, Some(&mint(&b, &["--uses", "1"])), &state_dir, "on-b");
    let schemas = output_schemas(&b);
    online_by_hostname(&b, &schemas, 1);
    let serial = wait_issued(&a, 1)["certificates"][0]["serial_hex"].as_str().unwrap().to_string();
    let kept = held(&state_dir);

    let rita = common::console::reviewer(&a, "rita");
    let admin = a.token("admin", "supervised", "1d");
    let revoked =
        common::console::approved_on(&a, &a, &rita, &admin, "revoke_certificate", json!({"serial_hex": serial}));
    assert_eq!(revoked["changed"], true, "{revoked}");
    // B holds the session: it is cut off there, and the agent stops.
    assert_ne!(agent.wait_for_exit(), 0, "cut off on the replica that held it: {}", agent.log_text());
    let again = tls_hello(b.agents, &ca_pem, &state_dir, Some(&kept)).expect("an answer");
    assert_eq!(refusal_code(&again), "certificate_revoked", "B refuses it from then on: {again}");
}

/// Waits until the agent's log says `needle`.
fn wait_logged(agent: &Agent, needle: &str) {
    let deadline = Instant::now() + PATIENCE;
    while !agent.log_text().contains(needle) {
        assert!(Instant::now() < deadline, "the agent never logged {needle:?}: {}", agent.log_text());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A state dir holding only a copy of `from`'s agent.json: a clone of that agent.
fn clone_of(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    std::fs::copy(from.join("agent.json"), to.join("agent.json")).unwrap();
}

/// Issue 43, HIGH 1: with an agent listener, the MCP port still answered the agent protocol,
/// without a client certificate: a clone made of a copied agent.json came online there as the
/// victim and was handed a fresh certificate. The MCP port now refuses agents whole,
/// enrollment included, and says where to connect.
#[test]
fn the_mcp_port_refuses_agents_when_an_agent_listener_exists() {
    let tls = Localhost::new();
    let keys = tempfile::tempdir().unwrap();
    let kek = kek_file(keys.path());
    let s = serve(&tls, &kek, &free_address(), None, &[]);
    let schemas = output_schemas(&s);
    let states = tempfile::tempdir().unwrap();
    let token = mint(&s, &["--uses", "2"]);
    let victim_dir = states.path().join("victim");
    let _victim = spawn(&s, &tls, Some(&token), &victim_dir, "victim");
    online_by_hostname(&s, &schemas, 1);
    wait_issued(&s, 1);

    let clone_dir = states.path().join("clone");
    clone_of(&victim_dir, &clone_dir);
    let mcp_port = format!("http://{}", s.addr);
    let mut clone = spawn_agent_with_logs_to(&mcp_port, None, None, &clone_dir, "clone", "true");
    let told = format!("connect to the agent listener on port {}", s.agents.port());
    wait_logged(&clone, &told);
    clone.kill();
    assert!(!clone_dir.join("certificate.json").exists(), "the clone was given no certificate");
    assert_eq!(issued(&s)["total"], 1, "none was issued: {}", issued(&s));
    let hostnames = structured(&s, &schemas, "list_agents", json!({}))["agents"].to_string();
    assert!(!hostnames.contains("\"clone\""), "the clone never reported: {hostnames}");

    // Enrollment too: refused before the token is looked at, so it keeps its use.
    let stream = std::net::TcpStream::connect(s.addr).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let (mut socket, _) = tungstenite::client(format!("ws://{}/agent/v1", s.addr), stream).unwrap();
    let enroll = json!({"type": "enroll", "protocol": 2, "enroll_token": token, "agent_version": "test"});
    socket.send(tungstenite::Message::text(enroll.to_string())).unwrap();
    let answer = common::raw_agent::next_frame(&mut socket).expect("an answer");
    assert_eq!(refusal_code(&answer), "certificate_required", "{answer}");
    assert!(answer["message"].as_str().unwrap().contains(&told), "{answer}");
    let _second = spawn(&s, &tls, Some(&token), &states.path().join("second"), "second");
    online_by_hostname(&s, &schemas, 2);
}

/// Issue 43, HIGH 2: where no client certificate is asked for (here a server without an agent
/// listener), revoking an agent's certificate neither cut off its session nor locked it out:
/// a hello with its credential and a signing request (a clone of its agent.json) was welcomed
/// with a new certificate. A revoked agent is now cut off and gets none until it is enrolled
/// again, on every listener, after a restart too.
#[test]
fn a_revoked_agent_is_cut_off_and_gets_no_new_certificate_on_any_listener() {
    let keys = tempfile::tempdir().unwrap();
    let kek = kek_file(keys.path());
    let s = common::start(&[FAST, &["--kek-file", kek.as_str(), "--cert-revocation-check-ms", "200"]].concat());
    let schemas = output_schemas(&s);
    let states = tempfile::tempdir().unwrap();
    let victim_dir = states.path().join("victim");
    let mut victim = spawn_agent_with_logs(&s, Some(&mint(&s, &["--uses", "1"])), &victim_dir, "victim", "true");
    let agent_id = online_by_hostname(&s, &schemas, 1)["victim"].clone();
    let serial = wait_issued(&s, 1)["certificates"][0]["serial_hex"].as_str().unwrap().to_string();
    let rita = common::console::reviewer(&s, "rita");
    let admin = s.token("admin", "supervised", "1d");
    let arguments = json!({"serial_hex": serial, "reason": "cloned"});
    common::console::approved_on(&s, &s, &rita, &admin, "revoke_certificate", arguments);
    assert_ne!(victim.wait_for_exit(), 0, "cut off and told it is revoked: {}", victim.log_text());
    wait_for_status(&s, &schemas, &agent_id, "offline");

    let clone_dir = states.path().join("clone");
    clone_of(&victim_dir, &clone_dir);
    let mut clone = spawn_agent_with_logs(&s, None, &clone_dir, "clone", "true");
    assert_ne!(clone.wait_for_exit(), 0, "refused for good: {}", clone.log_text());
    assert!(clone.log_text().contains("was revoked: enroll it again"), "{}", clone.log_text());
    let s = common::start_in(s.stop(), &[FAST, &["--kek-file", kek.as_str()]].concat());
    let mut again = spawn_agent_with_logs(&s, None, &clone_dir, "clone", "true");
    assert_ne!(again.wait_for_exit(), 0, "still refused after a restart: {}", again.log_text());
    assert!(!clone_dir.join("certificate.json").exists(), "never given a certificate");
    assert_eq!(issued(&s)["total"], 1, "{}", issued(&s));
}

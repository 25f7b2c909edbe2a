//! Upload grants against the real binary and a real agent (docs/uploads.md): the agent runs in
//! a mount namespace whose `/var/log` is a tmpfs of the test's making (its state dir bound
//! inside it), a log bundle goes up once under its grant and comes down from the console with
//! its digest, an oversize upload is cut off, a wrong digest, a revoked or expired grant and
//! the agent's own state are refused, retention ends on the server's (injected) clock, and
//! replicas serve what either received. One test runs it all over TLS.

use crate::common;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::agents::*;
use common::{Server, call_as};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The agent's `/var/log`: a directory of logs with the agent's state bound inside it, a large
/// file and a small one.
const LOGS: &str = "mkdir -p $STATE /var/log/app/old /var/log/app/state; \
     echo started > /var/log/app/current.log; echo rotated > /var/log/app/old/1.log; \
     mount --bind $STATE /var/log/app/state; \
     head -c 300000 /dev/zero | tr '\\000' x > /var/log/big.log; echo 'one line' > /var/log/small.log";

struct Fixture {
    s: Server,
    schemas: HashMap<String, Value>,
    agent: Agent,
    agent_id: String,
    supervised: String,
    _states: tempfile::TempDir,
}

fn fixture_on(s: Server) -> Fixture {
    let supervised = s.token("admin", "supervised", "30d");
    // Every tool's schema: the supervised tier lists them all.
    let schemas = output_schemas_as(&s, &supervised);
    let states = tempfile::tempdir().unwrap();
    let token = mint(&s, &["--uses", "1"]);
    let agent = spawn_agent_with_logs(&s, Some(&token), &states.path().join("logs-host"), "logs-host", LOGS);
    let agent_id = online_by_hostname(&s, &schemas, 1)["logs-host"].clone();
    Fixture { s, schemas, agent, agent_id, supervised, _states: states }
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

impl Fixture {
    fn mint(&self, arguments: Value) -> String {
        let mut arguments = arguments;
        arguments["agent_id"] = json!(self.agent_id);
        let minted = structured_as(&self.s, &self.schemas, &self.supervised, "mint_upload_grant", arguments);
        assert_eq!(minted["collect_with"]["definition"], "collect_files", "{minted}");
        minted["grant"]["grant_id"].as_str().unwrap().to_string()
    }

    /// Runs collect_files with `params` (operator tier: no approval); the agent's status and rows.
    fn collect(&self, params: Value) -> (Value, Vec<Value>) {
        let arguments = json!({"definition": "collect_files", "params": params, "agent_ids": [self.agent_id]});
        let started = structured(&self.s, &self.schemas, "execute_instruction", arguments);
        let execution_id = started["execution_id"].as_str().unwrap().to_string();
        let finished = wait_finished(&self.s, &self.schemas, &self.s.token, &execution_id);
        let rows = structured(&self.s, &self.schemas, "query_responses", json!({"execution_id": execution_id}));
        let rows = rows["rows"].as_array().cloned().unwrap_or_default();
        (finished["agents"][0].clone(), rows.iter().map(|r| r["values"].clone()).collect())
    }

    fn failed(&self, params: Value) -> String {
        let (status, _) = self.collect(params.clone());
        assert_eq!(status["status"], "failed", "{params}: {status} {}", self.agent.log_text());
        status["error"].as_str().unwrap_or_default().to_string()
    }

    fn grant(&self, grant_id: &str) -> Value {
        let listed = structured_as(&self.s, &self.schemas, &self.supervised, "list_upload_grants", json!({}));
        let grants = listed["grants"].as_array().unwrap();
        grants.iter().find(|g| g["grant_id"] == grant_id).cloned().unwrap_or_else(|| panic!("{grant_id}: {listed}"))
    }

    fn audit(&self, action: &str) -> Vec<Value> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let arguments = json!({"action": action, "limit": 100});
            let rows = structured_as(&self.s, &self.schemas, &self.supervised, "query_audit_log", arguments);
            let rows = rows["entries"].as_array().cloned().unwrap_or_default();
            if !rows.is_empty() || Instant::now() > deadline {
                return rows;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The console's download of a grant's content, as it came.
fn download(s: &Server, cookie: &str, grant_id: &str) -> common::RawAnswer {
    let request = format!(
        "GET /console/uploads/{grant_id}/content HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nCookie: toolgate_console={cookie}\r\n\r\n",
        s.addr
    );
    common::raw_bytes(s.addr, request.as_bytes()).unwrap()
}

fn credential(state_dir: &Path) -> String {
    let identity: Value =
        serde_json::from_str(&std::fs::read_to_string(state_dir.join("agent.json")).unwrap()).unwrap();
    identity["credential"].as_str().unwrap().to_string()
}

#[test]
fn a_log_bundle_goes_up_once_and_comes_down_from_the_console() {
    let f = fixture_on(common::start(FAST));
    let grant_id = f.mint(json!({"source_path": "/var/log/app", "declared_max_size": 1_000_000}));
    let (status, rows) = f.collect(json!({"grant_id": grant_id}));
    assert_eq!(status["status"], "succeeded", "{status} {}", f.agent.log_text());
    assert_eq!((rows[0]["kind"].clone(), rows[0]["path"].clone()), (json!("tar"), json!("/var/log/app")));
    let sha256 = rows[0]["sha256"].as_str().unwrap().to_string();

    let grant = f.grant(&grant_id);
    assert_eq!((grant["state"].clone(), grant["sha256"].clone()), (json!("stored"), json!(sha256)), "{grant}");
    assert_eq!(grant["content_kept"], true);
    let preview = grant["preview"].as_str().unwrap();
    assert_eq!(preview, "current.log\nold/1.log", "the bundle holds the logs, never the state bound among them");
    let text = call_as(&f.s, &f.supervised, "list_upload_grants", json!({})).json()["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.contains("BEGIN_UNTRUSTED_AGENT_DATA"), "the preview is marked as agent data: {text}");

    let again = f.failed(json!({"grant_id": grant_id}));
    assert!(again.contains("was used already"), "{again}");

    let reviewer = common::console::reviewer(&f.s, "reviewer");
    let page = common::console::get(&f.s, "/console/uploads", &reviewer.cookie);
    assert!(page.status == 200 && page.body.contains(&grant_id), "{page:?}");
    let (code, headers, body) = download(&f.s, &reviewer.cookie, &grant_id);
    assert_eq!(code, 200, "{headers:?}");
    assert_eq!(hex(&body), sha256, "the download is what the agent sent");
    let header = |name: &str| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str());
    assert_eq!(header("x-content-sha256"), Some(sha256.as_str()));
    assert!(header("content-disposition").is_some_and(|d| d.starts_with("attachment")), "{headers:?}");
    let mut members = Vec::new();
    for entry in tar::Archive::new(body.as_slice()).entries().unwrap() {
        let mut entry = entry.unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
        members.push((entry.path().unwrap().display().to_string(), text));
    }
    assert_eq!(
        members,
        [("current.log".to_string(), "started\n".to_string()), ("old/1.log".into(), "rotated\n".into())]
    );
    assert!(!String::from_utf8_lossy(&body).contains(&credential(&f.agent.state_dir)));

    let stored = f.audit("upload.stored");
    assert!(stored[0]["detail"].as_str().unwrap().contains(&sha256), "{stored:?}");
    assert_eq!(f.audit("upload.downloaded")[0]["principal"], "reviewer");
    assert!(f.audit("upload.refused")[0]["detail"].as_str().unwrap().contains("used already"));
}

#[test]
fn oversize_wrong_digests_revoked_grants_and_the_agents_state_are_refused() {
    let f = fixture_on(common::start(FAST));
    let big = f.mint(json!({"source_path": "/var/log/big.log", "declared_max_size": 100_000}));
    let cut = f.failed(json!({"grant_id": big}));
    assert!(cut.contains("passed the 100000 bytes the grant allows"), "{cut}");
    let grant = f.grant(&big);
    assert_eq!((grant["state"].clone(), grant["content_kept"].clone()), (json!("failed"), json!(false)), "{grant}");

    let wrong = f.mint(
        json!({"source_path": "/var/log/small.log", "declared_max_size": 100, "expected_sha256": "0".repeat(64)}),
    );
    let refused = f.failed(json!({"grant_id": wrong}));
    assert!(refused.contains("the grant expects 0000"), "{refused}");
    let right = hex(b"one line\n");
    let good = f.mint(json!({"source_path": "/var/log/small.log", "declared_max_size": 100, "expected_sha256": right}));
    let (status, rows) = f.collect(json!({"grant_id": good}));
    assert_eq!((status["status"].clone(), rows[0]["sha256"].clone()), (json!("succeeded"), json!(right)), "{status}");
    assert_eq!(f.grant(&good)["preview"], "one line\n");

    // A grant without a path takes the run's; one with a path refuses another.
    let open = f.mint(json!({"declared_max_size": 100}));
    let (status, _) = f.collect(json!({"grant_id": open, "path": "/var/log/small.log"}));
    assert_eq!(status["status"], "succeeded", "{status}");
    let fixed = f.mint(json!({"source_path": "/var/log/small.log", "declared_max_size": 100}));
    let other = f.failed(json!({"grant_id": fixed, "path": "/var/log/big.log"}));
    assert!(other.contains("is for /var/log/small.log, not /var/log/big.log"), "{other}");

    let state = f.mint(json!({"source_path": "/var/log/app/state/agent.json", "declared_max_size": 10_000}));
    let own = f.failed(json!({"grant_id": state}));
    assert!(own.contains("the agent's own state"), "{own}");
    assert!(!own.contains(&credential(&f.agent.state_dir)));
    assert_eq!(f.grant(&state)["state"], "failed", "the refusal was told to the server and spent the grant");

    let reviewer = common::console::reviewer(&f.s, "reviewer");
    let revoked = f.mint(json!({"source_path": "/var/log/small.log", "declared_max_size": 100}));
    let (answer, _) = approved(&f.s, &f.supervised, &reviewer, "revoke_upload_grant", json!({"grant_id": revoked}));
    assert_eq!((answer["changed"].clone(), answer["grant"]["state"].clone()), (json!(true), json!("revoked")));
    let refused = f.failed(json!({"grant_id": revoked}));
    assert!(refused.contains("was revoked by admin"), "{refused}");

    let too_big = call_as(
        &f.s,
        &f.supervised,
        "mint_upload_grant",
        json!({"agent_id": f.agent_id, "declared_max_size": 1u64 << 40}),
    );
    assert!(refusal(&too_big).contains("more than this server allows"), "{too_big:?}");
    let outside = call_as(
        &f.s,
        &f.supervised,
        "mint_upload_grant",
        json!({"agent_id": f.agent_id, "source_path": "/etc/shadow", "declared_max_size": 10}),
    );
    assert!(refusal(&outside).contains("under /var/log"), "{outside:?}");
    // Issue 43, LOW 10: a path that leaves /var/log through `..` was minted; it is refused
    // at mint time, and one that stays inside is kept normalised.
    for (path, resolved) in
        [("/var/log/../etc/shadow", "/var/etc/shadow"), ("/var/log/../../etc/shadow", "/etc/shadow")]
    {
        let dotted = json!({"agent_id": f.agent_id, "source_path": path, "declared_max_size": 10});
        let dotted = call_as(&f.s, &f.supervised, "mint_upload_grant", dotted);
        assert!(refusal(&dotted).contains(&format!("(`{resolved}` once `.` and `..` are resolved)")), "{dotted:?}");
    }
    let inside = f.mint(json!({"source_path": "/var/log/app/./..//small.log", "declared_max_size": 10}));
    assert_eq!(f.grant(&inside)["source_path"], "/var/log/small.log");
    let nobody =
        call_as(&f.s, &f.supervised, "mint_upload_grant", json!({"agent_id": "agt-nope", "declared_max_size": 10}));
    assert!(refusal(&nobody).contains("no agent `agt-nope`"), "{nobody:?}");
}

#[test]
fn retention_and_expiry_follow_the_servers_clock_across_a_restart() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let f = fixture_on(common::start(&[FAST, &["--listen", &addr]].concat()));
    let transient =
        f.mint(json!({"source_path": "/var/log/small.log", "declared_max_size": 100, "retention_class": "transient"}));
    let standard = f.mint(json!({"source_path": "/var/log/app/current.log", "declared_max_size": 100}));
    let unused = f.mint(json!({"source_path": "/var/log/small.log", "declared_max_size": 100, "ttl_secs": 3600}));
    for grant in [&transient, &standard] {
        assert_eq!(f.collect(json!({"grant_id": grant})).0["status"], "succeeded");
    }
    let Fixture { s, schemas, agent, agent_id, supervised, _states } = f;
    // Two days on: the transient class (1 day) ended, the standard one (30 days) did not, and
    // the grant minted for an hour expired.
    let later = (2 * 86_400_000i64).to_string();
    let s = common::start_with_env(
        s.stop(),
        &[FAST, &["--listen", &addr]].concat(),
        &[("TOOLGATE_TEST_CLOCK_OFFSET_MS", &later)],
    );
    let f = Fixture { s, schemas, agent, agent_id, supervised, _states };
    wait_for_status(&f.s, &f.schemas, &f.agent_id, "online");
    let deadline = Instant::now() + PATIENCE;
    while f.grant(&transient)["content_kept"] == true {
        assert!(Instant::now() < deadline, "the sweep at start did not delete the transient upload");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(f.grant(&standard)["content_kept"], true);
    assert_eq!(f.grant(&transient)["state"], "stored", "the grant's record stays; its content went");
    let deleted = f.audit("upload.deleted");
    assert!(deleted[0]["detail"].as_str().unwrap().contains(&hex(b"one line\n")), "{deleted:?}");
    assert_eq!(f.grant(&unused)["state"], "expired");
    let expired = f.failed(json!({"grant_id": unused}));
    assert!(expired.contains("expired"), "{expired}");
}

/// Replicas share uploads: the content is in their database, so what an agent sent to A is
/// listed on B and downloaded from B's console, byte for byte.
#[test]
fn an_upload_taken_by_one_replica_is_served_by_the_other() {
    let database = common::replicas::fresh_database("uploads_shared");
    let (a, b) = common::replicas::replicas(&database, &[]);
    let f = fixture_on(a);
    let grant_id = f.mint(json!({"source_path": "/var/log/small.log", "declared_max_size": 100}));
    assert_eq!(f.collect(json!({"grant_id": grant_id})).0["status"], "succeeded");
    let listed = structured_as(&b, &f.schemas, &f.supervised, "list_upload_grants", json!({"agent_id": f.agent_id}));
    assert_eq!(
        (listed["grants"][0]["grant_id"].clone(), listed["grants"][0]["state"].clone()),
        (json!(grant_id), json!("stored"))
    );
    let reviewer = common::console::reviewer(&b, "reviewer");
    let (code, _, body) = download(&b, &reviewer.cookie, &grant_id);
    assert_eq!((code, body), (200, b"one line\n".to_vec()));
}

/// Over TLS end to end: MCP, the agent's session and its upload connection all on https.
#[test]
fn a_file_goes_up_over_tls() {
    let tls = common::tls::Localhost::new();
    let extra: Vec<String> = tls.serve_args().into_iter().chain(FAST.iter().map(|a| a.to_string())).collect();
    let s = common::start(&extra.iter().map(String::as_str).collect::<Vec<_>>());
    // Executing at supervised needs a person; the operator tier runs it at once.
    let (supervised, operator) = (s.token("admin", "supervised", "1h"), s.token("admin", "operator", "1h"));
    let call = |token: &str, tool: &str, arguments: Value| tls.tool(s.addr, token, tool, arguments);
    let states = tempfile::tempdir().unwrap();
    let url = format!("https://localhost:{}", s.agents.port());
    let token = mint(&s, &["--uses", "1"]);
    let state_dir = states.path().join("tls-host");
    let agent = spawn_agent_with_logs_to(&url, Some(&tls.ca), Some(&token), &state_dir, "tls-host", LOGS);
    let deadline = Instant::now() + PATIENCE;
    let agent_id = loop {
        if let Some(id) = call(&operator, "list_agents", json!({"status": "online"}))["agents"][0]["agent_id"].as_str()
        {
            break id.to_string();
        }
        assert!(Instant::now() < deadline, "the agent is online over TLS: {}", agent.log_text());
        std::thread::sleep(Duration::from_millis(200));
    };
    let arguments = json!({"agent_id": agent_id, "source_path": "/var/log/small.log", "declared_max_size": 100});
    let minted = call(&supervised, "mint_upload_grant", arguments);
    let grant_id = minted["grant"]["grant_id"].as_str().unwrap();
    let run = json!({"definition": "collect_files", "params": {"grant_id": grant_id}, "agent_ids": [agent_id]});
    call(&operator, "execute_instruction", run);
    let deadline = Instant::now() + PATIENCE;
    while call(&operator, "list_upload_grants", json!({}))["grants"][0]["state"] != "stored" {
        assert!(Instant::now() < deadline, "the upload arrived over TLS: {}", agent.log_text());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(call(&operator, "list_upload_grants", json!({}))["grants"][0]["sha256"], hex(b"one line\n"));
}

/// Issue 43, LOW 8: query_responses showed the size and digest a `collect_files` result
/// claimed, whatever the server had received. The row carries the server's own figures: an
/// agent that reports an upload the server never took is failed for it, nothing of its claim
/// kept, and an honest one's row is what the server counted.
#[test]
fn the_rows_of_an_upload_carry_the_servers_figures_never_the_agents_claim() {
    let mut f = fixture_on(common::start(FAST));
    let honest = f.mint(json!({"source_path": "/var/log/small.log", "declared_max_size": 100}));
    let (status, rows) = f.collect(json!({"grant_id": honest}));
    assert_eq!(status["status"], "succeeded", "{status}");
    let stored = f.grant(&honest);
    assert_eq!((&rows[0]["size_bytes"], &rows[0]["sha256"]), (&stored["size_bytes"], &stored["sha256"]), "{stored}");

    // The agent's own credential, its process gone: a session that claims an upload.
    f.agent.kill();
    wait_for_status(&f.s, &f.schemas, &f.agent_id, "offline");
    let (mut session, welcome) =
        common::raw_agent::connection_for(&f.s, &f._states.path().join("logs-host"), "session");
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    let forged = f.mint(json!({"source_path": "/var/log/small.log", "declared_max_size": 100}));
    let arguments = json!({"definition": "collect_files", "params": {"grant_id": forged}, "agent_ids": [f.agent_id]});
    let started = structured(&f.s, &f.schemas, "execute_instruction", arguments);
    let execution_id = started["execution_id"].as_str().unwrap().to_string();
    let run = common::raw_agent::next_of_type(&mut session, "run");
    assert_eq!(run["execution_id"], execution_id.as_str());
    let claim = json!({"type": "result", "execution_id": execution_id, "steps": [{"status": "succeeded", "rows": [
        {"grant_id": forged, "path": "/var/log/small.log", "kind": "file", "size_bytes": 9, "sha256": "ab".repeat(32)}]}]});
    session.send(tungstenite::Message::text(claim.to_string())).unwrap();
    let finished = wait_finished(&f.s, &f.schemas, &f.s.token, &execution_id);
    assert_eq!(finished["agents"][0]["status"], "failed", "{finished}");
    let error = finished["agents"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("holds no upload under grant"), "{error}");
    let rows = structured(&f.s, &f.schemas, "query_responses", json!({"execution_id": execution_id}));
    assert!(!rows.to_string().contains(&"ab".repeat(32)), "the claim is not shown: {rows}");
}

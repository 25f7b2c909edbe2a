//! The fleet end to end, with real processes: agents (this very binary, `agent run`) each in a
//! UTS namespace of its own with its own hostname, enrolling against a real server and reading
//! this machine. Intervals are short (heartbeat 200 ms) and every wait is a poll with a
//! generous bound, so a loaded machine makes the test slower, never flaky.

use crate::common;

use std::collections::{BTreeSet, HashMap};
use std::process::Command;
use std::time::{Duration, Instant};

use common::agents::*;
use common::{Server, call_as, start, start_in};
use serde_json::{Value, json};

/// What dpkg itself says is installed: (name, version).
fn dpkg_packages() -> BTreeSet<(String, String)> {
    let out = Command::new("dpkg-query").args(["-W", "-f", "${Package}\\t${Version}\\n"]).output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('\t').map(|(n, v)| (n.to_string(), v.to_string())))
        .collect()
}

fn reported_packages(s: &Server, schemas: &HashMap<String, Value>, agent_id: &str) -> BTreeSet<(String, String)> {
    let arguments =
        json!({"agent_id": agent_id, "table": "installed_software", "columns": ["name", "version"], "limit": 1000});
    let rows = every_page(s, schemas, "get_agent_inventory", arguments, "rows");
    rows.iter()
        .map(|row| (row["name"].as_str().unwrap().to_string(), row["version"].as_str().unwrap().to_string()))
        .collect()
}

fn os_release_pretty_name() -> String {
    let text = std::fs::read_to_string("/etc/os-release").unwrap();
    let line = text.lines().find(|l| l.starts_with("PRETTY_NAME=")).unwrap();
    line["PRETTY_NAME=".len()..].trim_matches('"').to_string()
}

fn kernel_release() -> String {
    String::from_utf8(Command::new("uname").arg("-r").output().unwrap().stdout).unwrap().trim().to_string()
}

/// The niceness in a thread's /proc stat (field 19; the fields after the name's closing
/// parenthesis start at field 3).
fn nice_in(stat: &str) -> Option<i32> {
    stat[stat.rfind(')')? + 2..].split(' ').nth(19 - 3)?.parse().ok()
}

/// Each thread of process `pid`: its name, niceness and nanoseconds on a CPU (schedstat's
/// first field: finer than stat's clock ticks).
fn threads_of(pid: u32) -> Vec<(String, i32, u64)> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|task| {
            let task = task.ok()?.path();
            let name = std::fs::read_to_string(task.join("comm")).ok()?.trim().to_string();
            let nice = nice_in(&std::fs::read_to_string(task.join("stat")).ok()?)?;
            let ran = std::fs::read_to_string(task.join("schedstat")).ok()?.split(' ').next()?.parse().ok()?;
            Some((name, nice, ran))
        })
        .collect()
}

/// Nanoseconds the server's agents' threads have run.
fn agent_threads_cpu_ns(s: &Server) -> u64 {
    threads_of(s.pid()).iter().filter(|t| t.0 == "toolgate-agents").map(|t| t.2).sum()
}

#[test]
fn three_real_agents_enroll_report_go_offline_come_back_and_are_revoked() {
    let s = start(FAST);
    let schemas = output_schemas(&s);
    let agents_cpu_before = agent_threads_cpu_ns(&s);
    let states = tempfile::tempdir().unwrap();
    let token = mint(&s, &["--uses", "3"]);
    let names = ["fleet-a", "fleet-b", "fleet-c"];
    let mut agents: Vec<Agent> =
        names.iter().map(|n| spawn_agent(&s, Some(&token), &states.path().join(n), Some(n))).collect();

    // Three online agents, each with its own hostname and this machine's OS and kernel.
    let ids = online_by_hostname(&s, &schemas, 3);
    assert_eq!(ids.keys().cloned().collect::<BTreeSet<_>>(), names.iter().map(|n| n.to_string()).collect());
    let listed = structured(&s, &schemas, "list_agents", json!({}));
    assert_eq!(listed["total"], 3);
    for agent in listed["agents"].as_array().unwrap() {
        assert_eq!(agent["os"], os_release_pretty_name(), "{agent}");
        assert_eq!(agent["kernel"], kernel_release(), "{agent}");
    }
    let details = structured(&s, &schemas, "get_agent_details", json!({"agent_id": ids["fleet-a"]}));
    let facts = &details["facts"];
    assert!(facts["memory_total_bytes"].as_u64().unwrap() > 0 && facts["cpu_count"].as_u64().unwrap() > 0, "{facts}");
    assert!(!facts["disks"].as_array().unwrap().is_empty(), "{facts}");
    let state_file = states.path().join("fleet-a").join("agent.json");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&state_file).unwrap().permissions().mode() & 0o777, 0o600);

    // Each agent's installed_software is exactly what dpkg-query lists.
    let dpkg = dpkg_packages();
    assert!(!dpkg.is_empty());
    for name in names {
        wait_for_table(&s, &schemas, &ids[name], "installed_software");
        assert_eq!(reported_packages(&s, &schemas, &ids[name]), dpkg, "{name}");
    }
    // Their connections and reports ran on the agents' threads, below the calls' priority
    // (--agent-nice, 10 by default); the threads that answer calls kept the server's own.
    let own_nice = nice_in(&std::fs::read_to_string("/proc/thread-self/stat").unwrap()).unwrap();
    let threads = threads_of(s.pid());
    let (agents_threads, callers_threads): (Vec<_>, Vec<_>) = threads.iter().partition(|t| t.0 == "toolgate-agents");
    assert!(!agents_threads.is_empty(), "{threads:?}");
    assert!(agents_threads.iter().all(|t| t.1 == own_nice.max(10)), "{threads:?}");
    assert!(callers_threads.iter().all(|t| t.1 == own_nice), "{threads:?}");
    let agents_cpu = agent_threads_cpu_ns(&s) - agents_cpu_before;
    assert!(agents_cpu >= 1_000_000, "the agents' threads ran {agents_cpu} ns for three agents' inventories");

    let tables = structured(&s, &schemas, "list_inventory_tables", json!({}));
    let software = tables["tables"].as_array().unwrap().iter().find(|t| t["name"] == "installed_software").unwrap();
    assert_eq!((software["agents_reported"].clone(), software["agents_unavailable"].clone()), (json!(3), json!(0)));

    tags_and_scopes(&s, &schemas, &ids);

    // Silent (stopped, its socket still open): offline after the heartbeat window; resumed:
    // its connection was closed, so it reconnects, same id, online.
    agents[0].signal("-STOP");
    wait_for_status(&s, &schemas, &ids["fleet-a"], "offline");
    agents[0].signal("-CONT");
    wait_for_status(&s, &schemas, &ids["fleet-a"], "online");

    // Killed: offline; restarted from its state dir without a token: the same agent, online.
    agents[0].kill();
    wait_for_status(&s, &schemas, &ids["fleet-a"], "offline");
    agents[0] = spawn_agent(&s, None, &states.path().join("fleet-a"), Some("fleet-a"));
    wait_for_status(&s, &schemas, &ids["fleet-a"], "online");
    assert_eq!(online_by_hostname(&s, &schemas, 3)["fleet-a"], ids["fleet-a"]);

    // Revoked on the console: the server disconnects it (exit 4, "revoked"); on restart it
    // is refused (exit 3) and cannot come back without a new enrollment.
    let out = s.cli(&["agent", "revoke", &ids["fleet-c"]]);
    assert!(out.contains("revoked"), "{out}");
    assert_eq!(agents[2].wait_for_exit(), 4, "{}", agents[2].log_text());
    assert!(agents[2].log_text().contains("revoked"), "{}", agents[2].log_text());
    wait_for_status(&s, &schemas, &ids["fleet-c"], "revoked");
    let mut again = spawn_agent(&s, None, &states.path().join("fleet-c"), Some("fleet-c"));
    assert_eq!(again.wait_for_exit(), 3, "{}", again.log_text());
    assert!(again.log_text().contains("was revoked"), "{}", again.log_text());

    // The server restarts on the same address: the live agents come back by themselves.
    let addr = s.addr.to_string();
    let dir = s.stop();
    let s = start_in(dir, &[FAST, &["--listen", &addr]].concat());
    let back = online_by_hostname(&s, &schemas, 2);
    assert_eq!(
        (back["fleet-a"].as_str(), back["fleet-b"].as_str()),
        (ids["fleet-a"].as_str(), ids["fleet-b"].as_str())
    );
    let posture = structured(&s, &schemas, "get_fleet_posture_fast", json!({}));
    assert_eq!(
        (posture["total"].clone(), posture["online"].clone(), posture["revoked"].clone()),
        (json!(3), json!(2), json!(1))
    );
    drop(agents);
}

/// Polls until the agent has reported `table`.
/// Tags on real agents (the operator tier's delete needs a human), then scopes over them.
fn tags_and_scopes(s: &Server, schemas: &HashMap<String, Value>, ids: &HashMap<String, String>) {
    for (name, env) in [("fleet-a", "prod"), ("fleet-b", "staging")] {
        structured(s, schemas, "set_tag", json!({"agent_id": ids[name], "key": "env", "value": env}));
    }
    structured(s, schemas, "set_tag", json!({"agent_id": ids["fleet-a"], "key": "role", "value": "web"}));
    let found = structured(s, schemas, "search_agents_by_tag", json!({"key": "env", "value": "prod"}));
    assert_eq!(found["agents"][0]["hostname"], "fleet-a", "{found}");
    let pending = call_as(s, &s.token, "delete_tag", json!({"agent_id": ids["fleet-a"], "key": "role"})).json();
    assert_eq!(pending["error"]["code"], -32006, "delete_tag waits for a human at the operator tier: {pending}");
    let unknown = call_as(s, &s.token, "get_tags", json!({"agent_id": "agt-0000000000000000"})).json();
    assert_eq!(unknown["result"]["isError"], true, "{unknown}");
    assert!(unknown["result"]["content"][0]["text"].as_str().unwrap().contains("list_agents"), "{unknown}");

    let cases: &[(String, &[&str])] = &[
        (r#"tag:env = "prod""#.into(), &["fleet-a"]),
        (r#"tag:env in ("prod", "staging")"#.into(), &["fleet-a", "fleet-b"]),
        (r#"not tag:env exists"#.into(), &["fleet-c"]),
        (r#"hostname ~ "fleet-*" and not tag:role exists"#.into(), &["fleet-b", "fleet-c"]),
        (
            format!(r#"os.name ~ "*" and kernel = "{}" and status = online"#, kernel_release()),
            &["fleet-a", "fleet-b", "fleet-c"],
        ),
        (r#"hostname = "fleet-b" or (tag:env = prod and tag:role = web)"#.into(), &["fleet-a", "fleet-b"]),
        (r#"cpu.count < 1"#.into(), &[]),
    ];
    for (expression, expected) in cases {
        let preview = structured(s, schemas, "preview_scope_targets", json!({"expression": expression}));
        let mut got: Vec<&str> =
            preview["agents"].as_array().unwrap().iter().map(|a| a["hostname"].as_str().unwrap()).collect();
        got.sort_unstable();
        assert_eq!(got, *expected, "{expression}: {preview}");
        assert_eq!(preview["count"], expected.len(), "{expression}");
    }
    let mistakes = [
        ("hostnme = x", 1, "did you mean"),
        ("tag:enviroment = prod", 1, "no agent has a tag `enviroment`: did you mean `env`?"),
        ("hostname = x and", 17, "ends where an attribute"),
        ("cpu.count >= lots", 14, "is a number"),
    ];
    for (expression, column, message) in mistakes {
        let checked = structured(s, schemas, "validate_scope", json!({"expression": expression}));
        assert_eq!(checked["valid"], false, "{expression}");
        assert_eq!(checked["error"]["column"], column, "{expression}: {checked}");
        assert!(checked["error"]["message"].as_str().unwrap().contains(message), "{expression}: {checked}");
        let refused = call_as(s, &s.token, "preview_scope_targets", json!({"expression": expression})).json();
        assert_eq!(refused["result"]["isError"], true, "{expression}");
    }
    let kinds = structured(s, schemas, "discover_scope_kinds", json!({}));
    assert_eq!(kinds["tag_keys"], json!(["env", "role"]));

    // Fleet-wide inventory: the same dpkg package on every agent, by version rules.
    let rows = structured(
        s,
        schemas,
        "query_inventory",
        json!({"table": "installed_software", "filters": [{"column": "name", "op": "=", "value": "dpkg"}], "columns": ["version"]}),
    );
    assert_eq!(rows["rows"].as_array().unwrap().len(), 3, "{rows}");
    let version = rows["rows"][0]["version"].as_str().unwrap().to_string();
    let older = structured(s, schemas, "query_installed_software", json!({"name": "dpkg", "version_below": version}));
    assert_eq!(older["packages"], json!([]));
    let newer_or_same = structured(
        s,
        schemas,
        "query_installed_software",
        json!({"name": "dpk?", "version_at_least": format!("{version}~")}),
    );
    assert_eq!(newer_or_same["packages"].as_array().unwrap().len(), 3, "`~` sorts before the release: {newer_or_same}");
    let scoped = structured(
        s,
        schemas,
        "query_inventory",
        json!({"table": "users", "filters": [{"column": "uid", "op": "=", "value": 0}], "scope": "tag:env = prod"}),
    );
    assert_eq!(scoped["rows"].as_array().unwrap().len(), 1, "{scoped}");
    assert_eq!(
        (scoped["rows"][0]["hostname"].clone(), scoped["rows"][0]["name"].clone()),
        (json!("fleet-a"), json!("root"))
    );
    let wrong = call_as(s, &s.token, "query_inventory", json!({"table": "installed_sofware"})).json();
    assert!(
        wrong["result"]["content"][0]["text"].as_str().unwrap().contains("did you mean `installed_software`"),
        "{wrong}"
    );
}

#[test]
fn bad_expired_and_used_up_enrollment_tokens_are_refused_each_in_its_own_words() {
    let s = start(FAST);
    let states = tempfile::tempdir().unwrap();
    let cases = [("tge_not-a-token-of-this-server", "is not known to this server")];
    for (i, (token, message)) in cases.iter().enumerate() {
        let mut agent = spawn_agent(&s, Some(token), &states.path().join(format!("bad-{i}")), None);
        assert_eq!(agent.wait_for_exit(), 3, "{}", agent.log_text());
        assert!(agent.log_text().contains(message), "{}", agent.log_text());
    }
    let once = mint(&s, &["--uses", "1"]);
    let first = spawn_agent(&s, Some(&once), &states.path().join("first"), None);
    common::wait_for_agents(&s, &s.token, 1);
    let mut second = spawn_agent(&s, Some(&once), &states.path().join("second"), None);
    assert_eq!(second.wait_for_exit(), 3, "{}", second.log_text());
    assert!(second.log_text().contains("has been used as many times as it allows"), "{}", second.log_text());
    let short = mint(&s, &["--expires-in", "1s"]);
    std::thread::sleep(Duration::from_millis(1500));
    let mut late = spawn_agent(&s, Some(&short), &states.path().join("late"), None);
    assert_eq!(late.wait_for_exit(), 3, "{}", late.log_text());
    assert!(late.log_text().contains("has expired"), "{}", late.log_text());
    // Without a token and without a state: a clear error before any connection.
    let mut bare = spawn_agent(&s, None, &states.path().join("bare"), None);
    assert_eq!(bare.wait_for_exit(), 2, "{}", bare.log_text());
    assert!(bare.log_text().contains("not enrolled"), "{}", bare.log_text());
    assert!(first.state_dir.join("agent.json").exists());
}

/// Opens a WebSocket upgrade to /agent/v1 by hand and returns the socket and the status line.
fn upgrade(s: &Server) -> (std::net::TcpStream, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(s.agents).unwrap();
    let request = format!(
        "GET /agent/v1 HTTP/1.1\r\nHost: {}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        s.agents
    );
    stream.write_all(request.as_bytes()).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
        head.push(byte[0]);
    }
    let status = String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_string();
    (stream, status)
}

#[test]
fn the_agent_surface_has_caps_of_its_own() {
    // On a listener of its own (--agent-listen), with the MCP endpoint's allowance of
    // unauthenticated connections used up by idle sockets, an agent still enrolls at once.
    // The idle sockets hold their places for 120 s (the header-read timeout); the agent must
    // enroll well within that, so the test cannot pass by waiting them out.
    let caps = [
        "--max-unauthenticated-connections",
        "2",
        "--header-read-timeout",
        "120s",
        "--max-agent-handshakes",
        "1",
        "--agent-listen",
        "127.0.0.1:0",
    ];
    let s = start(&[FAST, &caps[..]].concat());
    assert_ne!(s.agents, s.addr);
    let idle: Vec<std::net::TcpStream> = (0..2).map(|_| std::net::TcpStream::connect(s.addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let states = tempfile::tempdir().unwrap();
    let token = mint(&s, &[]);
    let mut agent = spawn_agent(&s, Some(&token), &states.path().join("a"), None);
    let deadline = Instant::now() + PATIENCE;
    while !states.path().join("a").join("agent.json").exists() {
        assert!(Instant::now() < deadline, "the agent did not enroll: {}", agent.log_text());
        assert!(agent.child.try_wait().unwrap().is_none(), "the agent exited: {}", agent.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(idle);
    // The agent surface's own cap: one handshake at a time; a second connection that has not
    // said hello yet is refused (503), at the HTTP level or at accept.
    // The agent's own connections hold the one place for a moment each (its report
    // connection opens right after enrollment): wait for a free moment, generously.
    let deadline = Instant::now() + PATIENCE;
    let _held = loop {
        let (held, first) = upgrade(&s);
        if first.contains("101") {
            break held;
        }
        assert!(Instant::now() < deadline, "the handshake place never came free: {first}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let (_, second) = upgrade(&s);
    assert!(second.contains("503") || second.is_empty(), "{second}");
}

#[test]
fn a_revocation_on_the_console_applies_within_the_sweep_not_the_heartbeat_interval() {
    // Heartbeats every 10 minutes: were revocations picked up once per heartbeat interval,
    // the agent would outlive this test's patience by far.
    let s = start(&["--agent-heartbeat-ms", "600000"]);
    let states = tempfile::tempdir().unwrap();
    let token = mint(&s, &[]);
    let mut agent = spawn_agent(&s, Some(&token), &states.path().join("a"), None);
    let id = common::wait_for_agents(&s, &s.token, 1).remove(0);
    s.cli(&["agent", "revoke", &id]);
    assert_eq!(agent.wait_for_exit(), 4, "{}", agent.log_text());
}

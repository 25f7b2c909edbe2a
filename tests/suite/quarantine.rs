//! Quarantine on real agents: the soft mode (instructions refused but diagnostics, kept across
//! the agent's restart, released), and network isolation (`--allow-network-isolation`) tested
//! only inside a network namespace this test creates, joined to this one by a veth pair: the
//! host's own rule set is never touched.

use crate::common;

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::agents::*;
use common::{Server, bin, call_as, start};
use serde_json::{Value, json};

fn run_on(
    s: &Server,
    schemas: &std::collections::HashMap<String, Value>,
    agent_id: &str,
    definition: &str,
    params: Value,
) -> Value {
    run_instruction(s, schemas, definition, params, &[agent_id]).0
}

fn wait_quarantine(s: &Server, schemas: &std::collections::HashMap<String, Value>, hostname: &str, state: &str) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let listed = structured(s, schemas, "list_agents", json!({"name_prefix": hostname}));
        if listed["agents"][0]["quarantine"] == state {
            return;
        }
        assert!(Instant::now() < deadline, "{hostname} not {state}: {listed}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
#[test]
fn quarantine_survives_an_agent_restart_blocks_changes_allows_diagnostics_and_is_released() {
    let Fleet { s, schemas, states, mut agents, ids } = fleet_of_three(FAST);
    let supervised = s.token("admin", "supervised", "1h");
    let api = common::console::reviewer(&s, "reviewer");
    let operator_denied =
        call_as(&s, &s.token, "quarantine_device", json!({"agent_id": ids["fleet-a"], "reason": "x"}));
    assert!(refusal(&operator_denied).contains("operator"), "{operator_denied:?}");

    // Issue 43, 16: this agent cannot cut its network (it runs without
    // --allow-network-isolation), yet a quarantine read `active` as if it had. A network
    // quarantine is refused before any ticket, saying so; `mode: soft` asks for what it can do.
    let hard = call_as(&s, &supervised, "quarantine_device", json!({"agent_id": ids["fleet-a"], "reason": "x"})).json();
    assert_eq!(hard["error"]["code"], -32003, "{hard}");
    let message = hard["error"]["message"].as_str().unwrap();
    assert!(message.contains("cannot cut its network") && message.contains("--allow-network-isolation"), "{message}");
    assert!(message.contains("mode: soft"), "{message}");
    let details = structured(&s, &schemas, "get_agent_details", json!({"agent_id": ids["fleet-a"]}));
    assert_eq!(details["quarantine"]["enforcement"]["mode"], "soft", "{details}");
    let (answer, _) = approved(
        &s,
        &supervised,
        &api,
        "quarantine_device",
        json!({"agent_id": ids["fleet-a"], "reason": "suspicious process", "mode": "soft"}),
    );
    assert_eq!(answer["enforcement"]["mode"], "soft", "{answer}");
    assert_eq!((answer["quarantined"].clone(), answer["told_now"].clone()), (json!(true), json!(true)), "{answer}");
    let listed = structured(&s, &schemas, "list_agents", json!({"quarantined": true}));
    assert_eq!(listed["total"], 1, "{listed}");
    wait_quarantine(&s, &schemas, "fleet-a", "active");

    // The agent restarts: still quarantined, by its own state.
    agents[0].kill();
    agents[0] = restart_agent(&s, states.path(), "fleet-a");
    wait_for_status(&s, &schemas, &ids["fleet-a"], "online");
    let run = |definition: &str, params: Value| run_on(&s, &schemas, &ids["fleet-a"], definition, params);
    let blocked = run("write_marker", json!({"name": "m"}));
    // The server never sends a quarantined agent a change (the agent would refuse it too).
    assert_eq!(blocked["agents"][0]["status"], "refused", "{blocked}");
    assert!(blocked["agents"][0]["error"].as_str().unwrap().contains("quarantined"), "{blocked}");
    assert!(!states.path().join("fleet-a/work/m").exists());
    let diagnostic = run("os_facts", json!({}));
    assert_eq!(diagnostic["agents"][0]["status"], "succeeded", "a diagnostic runs in quarantine: {diagnostic}");

    let (released, _) = approved(&s, &supervised, &api, "release_quarantine", json!({"agent_id": ids["fleet-a"]}));
    assert_eq!(released["quarantined"], false);
    wait_quarantine(&s, &schemas, "fleet-a", "none");
    let allowed = run("write_marker", json!({"name": "m"}));
    assert_eq!(allowed["agents"][0]["status"], "succeeded", "{allowed}");
    assert!(states.path().join("fleet-a/work/m").exists());
}

/// A veth pair: this end (HOST_IP) here, the other end waiting to be moved into the agent's
/// namespace. Deleting this end on drop deletes both.
struct Veth {
    host: String,
}

const HOST_IP: &str = "10.213.7.1";
const AGENT_IP: &str = "10.213.7.2";

impl Veth {
    fn new() -> Self {
        let n = std::process::id() % 100_000;
        let (host, peer) = (format!("tgh{n}"), format!("tga{n}"));
        let ip = |args: &[&str]| assert!(Command::new("ip").args(args).status().unwrap().success(), "ip {args:?}");
        ip(&["link", "add", &host, "type", "veth", "peer", "name", &peer]);
        ip(&["addr", "add", &format!("{HOST_IP}/30"), "dev", &host]);
        ip(&["link", "set", &host, "up"]);
        Veth { host }
    }

    fn peer(&self) -> String {
        self.host.replacen("tgh", "tga", 1)
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.host]).status();
    }
}

/// Whether a TCP connection from inside the agent's namespace to `port` here succeeds.
fn reachable_from(agent_pid: u32, port: u16) -> bool {
    let probe = format!("import socket; socket.create_connection(('{HOST_IP}', {port}), timeout=2)");
    Command::new("nsenter")
        .args(["-t", &agent_pid.to_string(), "-n", "python3", "-c", &probe])
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

fn tables_in(pid: Option<u32>) -> String {
    let mut command = Command::new("nsenter");
    match pid {
        Some(pid) => command.args(["-t", &pid.to_string(), "-n", "nft", "list", "tables"]),
        None => command.args(["-t", "1", "-n", "nft", "list", "tables"]),
    };
    String::from_utf8(command.output().unwrap().stdout).unwrap()
}

#[test]
fn network_isolation_cuts_everything_but_the_server_inside_its_own_namespace() {
    assert!(
        Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0"),
        "this test creates a network namespace and a veth pair: run it as root (as .ci/run does)"
    );
    assert!(
        Command::new("nft").arg("--version").status().is_ok_and(|s| s.success()),
        "needs nft (apt-get install nftables)"
    );
    let veth = Veth::new();
    let s = start(&[FAST, &["--agent-listen", &format!("{HOST_IP}:0")]].concat());
    let schemas = output_schemas(&s);
    let api = common::console::reviewer(&s, "reviewer");
    let supervised = s.token("admin", "supervised", "1h");
    // Something else on this side for the agent's host to reach, or not.
    let other = TcpListener::bind(format!("{HOST_IP}:0")).unwrap();
    let other_port = other.local_addr().unwrap().port();
    std::thread::spawn(move || for _ in other.incoming() {});

    let states = tempfile::tempdir().unwrap();
    let state_dir = states.path().join("isolated");
    let token = mint(&s, &["--uses", "1"]);
    let peer = veth.peer();
    // Waits (60 s at most) for the veth peer this test moves in, then becomes the agent.
    let setup = format!(
        "hostname isolated && i=0 && while ! ip link show {peer} >/dev/null 2>&1; do i=$((i+1)); [ $i -lt 1200 ] || exit 1; sleep 0.05; done && \
         ip addr add {AGENT_IP}/30 dev {peer} && ip link set {peer} up && ip link set lo up && exec \"$@\""
    );
    let log = states.path().join("isolated.log");
    let child = Command::new("unshare")
        .args(["--net", "--uts", "sh", "-c", &setup, "sh", bin(), "agent", "run"])
        .args(["--server", &format!("http://{}", s.agents), "--state-dir", &state_dir.display().to_string()])
        .args([
            "--enroll-token",
            &token,
            "--allow-network-isolation",
            "--reconnect-spread-ms",
            "200",
            "--reconnect-max-ms",
            "1000",
        ])
        .env("TOOLGATE_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // Killed on drop, should the test fail half-way.
    let mut agent = Agent { child, state_dir, log: log.clone() };
    let pid = agent.child.id();
    // The peer moves only once `unshare` has made the namespace (else it would stay here).
    let namespace = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/net")).ok();
    let deadline = Instant::now() + PATIENCE;
    while namespace(&pid.to_string()) == namespace("self") {
        assert!(Instant::now() < deadline, "unshare never made its network namespace");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(Command::new("ip").args(["link", "set", &peer, "netns", &pid.to_string()]).status().unwrap().success());
    let deadline = Instant::now() + PATIENCE;
    let agent_id = loop {
        let listed = structured(&s, &schemas, "list_agents", json!({"status": "online", "name_prefix": "isolated"}));
        if let Some(id) = listed["agents"][0]["agent_id"].as_str() {
            break id.to_string();
        }
        let exited = agent.child.try_wait().unwrap();
        assert!(
            exited.is_none() && Instant::now() < deadline,
            "the agent is not online ({exited:?}): {}",
            std::fs::read_to_string(&log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(reachable_from(pid, other_port), "before quarantine the host reaches anything");

    approved(&s, &supervised, &api, "quarantine_device", json!({"agent_id": agent_id, "reason": "isolate it"}));
    wait_quarantine(&s, &schemas, "isolated", "active");
    let devices = structured(&s, &schemas, "list_quarantined_devices", json!({}));
    assert_eq!(devices["devices"][0]["enforcement"]["mode"], "network", "it cuts its network: {devices}");
    assert!(tables_in(Some(pid)).contains("toolgate_quarantine"), "{}", std::fs::read_to_string(&log).unwrap());
    assert!(!reachable_from(pid, other_port), "isolated: only the server is reachable");
    assert!(!tables_in(None).contains("toolgate_quarantine"), "the host's own rule set is never touched");
    // The server still reaches it: a diagnostic runs and its result (a report connection) arrives.
    let facts = run_on(&s, &schemas, &agent_id, "os_facts", json!({}));
    assert_eq!(facts["agents"][0]["status"], "succeeded", "{facts}");

    approved(&s, &supervised, &api, "release_quarantine", json!({"agent_id": agent_id}));
    wait_quarantine(&s, &schemas, "isolated", "none");
    assert!(reachable_from(pid, other_port), "released: the network is back");
    assert!(!tables_in(Some(pid)).contains("toolgate_quarantine"));
    drop(agent);
    drop(veth);
}

//! Real agent processes for the fleet tests: `toolgate agent run`, each in a UTS namespace of
//! its own (its own hostname), and the polling helpers the tests wait with. Every wait is a
//! poll with a generous bound, so a loaded machine makes a test slower, never flaky.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Response, Server, bin, call_as};

pub const FAST: &[&str] = &["--agent-heartbeat-ms", "200", "--agent-missed-heartbeats", "3"];
pub const PATIENCE: Duration = Duration::from_secs(60);

pub fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// An agent process; its standard error goes to `log`.
pub struct Agent {
    pub child: Child,
    pub state_dir: PathBuf,
    pub log: PathBuf,
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts `toolgate agent run`, in a new UTS namespace named `hostname` when one is given
/// (as root; otherwise inside a user namespace that maps this user to root).
pub fn spawn_agent(server: &Server, token: Option<&str>, state_dir: &Path, hostname: Option<&str>) -> Agent {
    spawn_agent_in(server, token, state_dir, hostname, None)
}

/// [`spawn_agent`] with a working directory of its own: `/proc/self/cwd/FILE` then names a
/// different file for each agent, at one absolute path.
pub fn spawn_agent_in(
    server: &Server,
    token: Option<&str>,
    state_dir: &Path,
    hostname: Option<&str>,
    cwd: Option<&Path>,
) -> Agent {
    spawn_agent_to(&[server], token, state_dir, hostname, cwd)
}

/// [`spawn_agent_in`] with several servers (replicas): the agent uses the first it can reach.
pub fn spawn_agent_to(
    servers: &[&Server],
    token: Option<&str>,
    state_dir: &Path,
    hostname: Option<&str>,
    cwd: Option<&Path>,
) -> Agent {
    let log = state_dir.with_extension("log");
    let mut run = vec!["agent".to_string(), "run".into()];
    for server in servers {
        run.extend(["--server".to_string(), format!("http://{}", server.agents)]);
    }
    run.extend([
        "--state-dir".into(),
        state_dir.display().to_string(),
        "--reconnect-spread-ms".into(),
        "200".into(),
        "--reconnect-max-ms".into(),
        "1000".into(),
    ]);
    if let Some(token) = token {
        run.extend(["--enroll-token".to_string(), token.to_string()]);
    }
    let mut command = match hostname {
        Some(name) => {
            let mut c = Command::new("unshare");
            if !is_root() {
                c.args(["--user", "--map-root-user"]);
            }
            c.args(["--uts", "sh", "-c", r#"hostname "$0" && exec "$@""#, name, bin()]);
            c
        }
        None => Command::new(bin()),
    };
    if let Some(dir) = cwd {
        command.current_dir(dir);
    }
    let child = command
        .args(&run)
        .env("TOOLGATE_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("unshare (util-linux) and the toolgate binary run");
    Agent { child, state_dir: state_dir.to_path_buf(), log }
}

/// Starts an agent inside a mount namespace of its own whose `/var/log` is a fresh tmpfs,
/// prepared by the shell commands `setup` (run first, in the namespace; `$STATE` is the state
/// dir). The host's own mounts are never touched: the namespace's are private and go with it.
pub fn spawn_agent_with_logs(s: &Server, token: Option<&str>, state_dir: &Path, hostname: &str, setup: &str) -> Agent {
    spawn_agent_with_logs_to(&format!("http://{}", s.agents), None, token, state_dir, hostname, setup)
}

/// [`spawn_agent_with_logs`] to the server at `url`, trusting `ca` (a PEM file) for an https one.
pub fn spawn_agent_with_logs_to(
    url: &str,
    ca: Option<&Path>,
    token: Option<&str>,
    state_dir: &Path,
    hostname: &str,
    setup: &str,
) -> Agent {
    let state = state_dir.display().to_string();
    let script =
        format!("set -e; hostname {hostname}; mount -t tmpfs tmpfs /var/log; STATE={state}; {setup}; exec \"$@\"");
    let log = state_dir.with_extension("log");
    let mut command = Command::new("unshare");
    if !is_root() {
        command.args(["--user", "--map-root-user"]);
    }
    command
        .args(["--mount", "--propagation", "private", "--uts", "sh", "-c", &script, "sh", bin(), "agent", "run"])
        .args(["--server", url, "--state-dir", &state])
        .args(["--reconnect-spread-ms", "200", "--reconnect-max-ms", "1000"]);
    if let Some(token) = token {
        command.args(["--enroll-token", token]);
    }
    if let Some(ca) = ca {
        command.arg("--ca").arg(ca);
    }
    let child = command
        .env("TOOLGATE_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("unshare (util-linux) runs");
    Agent { child, state_dir: state_dir.to_path_buf(), log }
}

impl Agent {
    pub fn wait_for_exit(&mut self) -> i32 {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            assert!(Instant::now() < deadline, "the agent did not exit: {}", self.log_text());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the agent (SIGKILL: no goodbye) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, signal: &str) {
        assert!(Command::new("kill").args([signal, &self.child.id().to_string()]).status().unwrap().success());
    }
}

pub fn mint(server: &Server, args: &[&str]) -> String {
    let mut all = vec!["enroll-token", "create"];
    all.extend_from_slice(args);
    let out = server.cli(&all);
    out.split_whitespace().find(|w| w.starts_with("tge_")).unwrap_or_else(|| panic!("no secret in: {out}")).to_string()
}

/// Calls a tool that must succeed; checks its structured result against its outputSchema.
pub fn structured(s: &Server, schemas: &HashMap<String, Value>, tool: &str, arguments: Value) -> Value {
    structured_as(s, schemas, &s.token, tool, arguments)
}

/// Every row of a listing tool's answer, page by page: each page's rows, then the next with
/// its `next_cursor`, until none. Each page must say, with `remaining`, how many come after it.
pub fn every_page(
    s: &Server,
    schemas: &HashMap<String, Value>,
    tool: &str,
    arguments: Value,
    field: &str,
) -> Vec<Value> {
    every_page_as(s, schemas, &s.token, tool, arguments, field)
}

/// [`every_page`], called with `token`.
pub fn every_page_as(
    s: &Server,
    schemas: &HashMap<String, Value>,
    token: &str,
    tool: &str,
    arguments: Value,
    field: &str,
) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut arguments = arguments;
    let mut promised: Option<u64> = None;
    loop {
        let page = structured_as(s, schemas, token, tool, arguments.clone());
        let found = page[field].as_array().unwrap_or_else(|| panic!("{tool}: no {field}: {page}"));
        if let Some(promised) = promised {
            assert_eq!(promised, found.len() as u64 + page["remaining"].as_u64().unwrap(), "{tool}: remaining: {page}");
        }
        rows.extend(found.iter().cloned());
        promised = page["remaining"].as_u64();
        match page["next_cursor"].as_str() {
            Some(cursor) => {
                assert!(!found.is_empty(), "{tool}: an empty page with a cursor: {page}");
                arguments["cursor"] = json!(cursor);
            }
            None => {
                assert_eq!(promised, Some(0), "{tool}: the last page says none remain: {page}");
                return rows;
            }
        }
    }
}

pub fn output_schemas(s: &Server) -> HashMap<String, Value> {
    output_schemas_as(s, &s.token)
}

/// The output schemas of every tool `token`'s tier lists (every toolset chosen).
pub fn output_schemas_as(s: &Server, token: &str) -> HashMap<String, Value> {
    let listed = super::request(
        s.addr,
        "POST",
        &[
            ("Authorization", &format!("Bearer {token}")),
            ("MCP-Protocol-Version", "2025-11-25"),
            ("X-MCP-Toolsets", "all"),
        ],
        Some(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string()),
    )
    .json();
    listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| Some((t["name"].as_str()?.to_string(), t.get("outputSchema")?.clone())))
        .collect()
}

/// Polls get_agent_details until the agent has `status`.
pub fn wait_for_status(s: &Server, schemas: &HashMap<String, Value>, agent_id: &str, status: &str) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let details = structured(s, schemas, "get_agent_details", json!({"agent_id": agent_id}));
        if details["status"] == status {
            return;
        }
        assert!(Instant::now() < deadline, "{agent_id} not {status} after {PATIENCE:?}: {details}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until the agent has reported inventory `table`.
pub fn wait_for_table(s: &Server, schemas: &HashMap<String, Value>, agent_id: &str, table: &str) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let details = structured(s, schemas, "get_agent_details", json!({"agent_id": agent_id}));
        if details["inventory"].as_array().unwrap().iter().any(|t| t["table"] == table) {
            return;
        }
        assert!(Instant::now() < deadline, "{agent_id} never reported {table}: {details}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The online agents' ids by hostname, once `count` have enrolled and reported their facts.
pub fn online_by_hostname(s: &Server, schemas: &HashMap<String, Value>, count: usize) -> HashMap<String, String> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let listed = structured(s, schemas, "list_agents", json!({"status": "online"}));
        let reported: HashMap<String, String> = listed["agents"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| Some((a["hostname"].as_str()?.to_string(), a["agent_id"].as_str()?.to_string())))
            .collect();
        if reported.len() >= count {
            return reported;
        }
        assert!(Instant::now() < deadline, "fewer than {count} agents reported: {listed}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Polls get_execution_status until it is finished; the last answer.
pub fn wait_finished(s: &Server, schemas: &HashMap<String, Value>, token: &str, execution_id: &str) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let status = structured_as(s, schemas, token, "get_execution_status", json!({"execution_id": execution_id}));
        if status["finished"] == true {
            assert_eq!(status["retry_after_ms"], Value::Null);
            return status;
        }
        assert_eq!(status["retry_after_ms"], 2000, "the poll floor while unfinished: {status}");
        assert!(Instant::now() < deadline, "{execution_id} unfinished after {PATIENCE:?}: {status}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs `definition` on `agents`; its finished status and every row the agents sent.
pub fn run_instruction(
    s: &Server,
    schemas: &HashMap<String, Value>,
    definition: &str,
    params: Value,
    agents: &[&str],
) -> (Value, Vec<Value>) {
    run_execution(s, schemas, json!({"definition": definition, "params": params, "agent_ids": agents}))
}

/// execute_instruction with `arguments`; the final status and the rows once it finished.
pub fn run_execution(s: &Server, schemas: &HashMap<String, Value>, arguments: Value) -> (Value, Vec<Value>) {
    let started = structured(s, schemas, "execute_instruction", arguments);
    let execution = started["execution_id"].as_str().unwrap();
    let status = wait_finished(s, schemas, &s.token, execution);
    let rows = structured(s, schemas, "query_responses", json!({"execution_id": execution, "limit": 1000}));
    (status, rows["rows"].as_array().unwrap().clone())
}

/// [`structured`] with another token.
pub fn structured_as(s: &Server, schemas: &HashMap<String, Value>, token: &str, tool: &str, arguments: Value) -> Value {
    let answer = call_as(s, token, tool, arguments.clone()).json();
    let result = &answer["result"];
    assert_eq!(result["isError"], false, "{tool} {arguments}: {answer}");
    let content = result["structuredContent"].clone();
    let validator = jsonschema::validator_for(&schemas[tool]).unwrap();
    let errors: Vec<String> = validator.iter_errors(&content).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{tool} broke its outputSchema: {errors:?}\n{content}");
    content
}

/// The text of an error answer: a JSON-RPC error's message and data, or an isError result.
pub fn refusal(r: &Response) -> String {
    let v = r.json();
    if v.get("error").is_some() {
        return v["error"].to_string();
    }
    assert_eq!(v["result"]["isError"], true, "expected a refusal: {v}");
    v["result"]["content"][0]["text"].as_str().unwrap().to_string()
}

pub fn approval_id(r: &Response) -> String {
    let v = r.json();
    assert_eq!(v["error"]["code"], -32006, "expected an approval ticket: {v}");
    v["error"]["data"]["approval_id"].as_str().unwrap().to_string()
}

pub fn approve(s: &Server, reviewer: &super::console::Reviewer, id: &str) {
    let r = super::console::approve(s, reviewer, id);
    assert_eq!(r.status, 200, "{r:?}");
}

/// A supervised-tier call: its ticket, a person's approval, the recall. The recall's answer.
pub fn approved(
    s: &Server,
    token: &str,
    api: &super::console::Reviewer,
    tool: &str,
    arguments: Value,
) -> (Value, Value) {
    let id = approval_id(&call_as(s, token, tool, arguments.clone()));
    approve(s, api, &id);
    let mut recall = arguments;
    recall["approval_id"] = json!(id);
    let answer = call_as(s, token, tool, recall.clone()).json();
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    (answer["result"]["structuredContent"].clone(), recall)
}

/// The file each agent reads at one absolute path: its own working directory's.
pub const PROBE: &str = "/proc/self/cwd/probe.txt";

/// A server started with `extra` and three agents on it ([`three_agents`]), with the tools'
/// output schemas; fields drop agents first.
pub struct Fleet {
    pub agents: Vec<Agent>,
    pub ids: HashMap<String, String>,
    pub states: tempfile::TempDir,
    pub schemas: HashMap<String, Value>,
    pub s: Server,
}

pub fn fleet_of_three(extra: &[&str]) -> Fleet {
    let s = super::start(extra);
    let schemas = output_schemas(&s);
    let states = tempfile::tempdir().unwrap();
    let (agents, ids) = three_agents(&s, states.path());
    Fleet { agents, ids, states, schemas, s }
}

/// Three agents named fleet-a/b/c, each in `states/<name>` and working in `states/<name>.cwd`
/// whose probe.txt holds text of its own. Returns them and their ids by hostname.
pub fn three_agents(s: &Server, states: &Path) -> (Vec<Agent>, HashMap<String, String>) {
    let token = mint(s, &["--uses", "3"]);
    let agents = ["fleet-a", "fleet-b", "fleet-c"]
        .iter()
        .map(|name| {
            let cwd = states.join(format!("{name}.cwd"));
            std::fs::create_dir_all(&cwd).unwrap();
            std::fs::write(cwd.join("probe.txt"), format!("probe of {name}\n")).unwrap();
            spawn_agent_in(s, Some(&token), &states.join(name), Some(name), Some(&cwd))
        })
        .collect();
    let schemas = output_schemas(s);
    (agents, online_by_hostname(s, &schemas, 3))
}

pub fn restart_agent(s: &Server, states: &Path, name: &str) -> Agent {
    let cwd = states.join(format!("{name}.cwd"));
    spawn_agent_in(s, None, &states.join(name), Some(name), Some(&cwd))
}

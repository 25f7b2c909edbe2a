//! The real binary on a free loopback port with a fresh data dir, and a raw HTTP/1.1 client
//! (raw so that tests can send what well-behaved clients never would).

#![allow(dead_code)]

pub mod agents;
pub mod apt;
pub mod console;
pub mod issuer;
pub mod raw_agent;
pub mod replicas;
pub mod sse;
pub mod teams;
pub mod testbed;
pub mod tls;
pub mod trust;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

pub struct Server {
    child: Child,
    pub addr: SocketAddr,
    /// Where agents connect (`--agent-listen`, or the same address).
    pub agents: SocketAddr,
    pub data_dir: tempfile::TempDir,
    /// The operator-tier demo token printed on first start.
    pub token: String,
    /// The shared database it runs on (`--database`), which CLI commands must name too.
    pub database: Option<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The wall clock in milliseconds since the Unix epoch, as the server and agents stamp times.
/// Held by a test while it keeps the machine's CPUs busy on purpose (a burner on the host, or in
/// an endpoint) and measures it: two such tests at once would each see the other's load, or
/// never get the CPUs their signal needs.
pub fn machine_cpus_to_myself() -> std::sync::MutexGuard<'static, ()> {
    static BURNING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    BURNING.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_toolgate")
}

pub fn start(extra: &[&str]) -> Server {
    let data_dir = tempfile::tempdir().unwrap();
    start_in(data_dir, extra)
}

pub fn start_in(data_dir: tempfile::TempDir, extra: &[&str]) -> Server {
    start_with_env(data_dir, extra, &[])
}

pub fn start_with_env(data_dir: tempfile::TempDir, extra: &[&str], env: &[(&str, &str)]) -> Server {
    start_logging_to(data_dir, extra, env, None)
}

/// Starts the server with its standard error written to `stderr_file` (stdout is read for
/// the address and token, and copied into `stderr_file`'s sibling `stdout` file too).
pub fn start_logging_to(
    data_dir: tempfile::TempDir,
    extra: &[&str],
    env: &[(&str, &str)],
    log_dir: Option<&std::path::Path>,
) -> Server {
    let stderr = match log_dir {
        Some(dir) => Stdio::from(std::fs::File::create(dir.join("stderr")).unwrap()),
        None => Stdio::null(),
    };
    let mut stdout_copy = log_dir.map(|dir| std::fs::File::create(dir.join("stdout")).unwrap());
    // Any free port, unless the test chose one (a restart on the same address, say).
    let listen: &[&str] = if extra.contains(&"--listen") { &[] } else { &["--listen", "127.0.0.1:0"] };
    let mut child = Command::new(bin())
        .envs(env.iter().copied())
        .arg("serve")
        .args(listen)
        .arg("--data-dir")
        .arg(data_dir.path())
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("the toolgate binary starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut token = std::fs::read_to_string(data_dir.path().join("demo-token")).unwrap_or_default();
    let mut agents = None;
    let addr = loop {
        let line = lines.next().expect("the server printed its address").unwrap();
        if let Some(f) = stdout_copy.as_mut() {
            let _ = writeln!(f, "{line}");
        }
        if let Some(t) = line.split_whitespace().find(|w| w.starts_with("tg_"))
            && token.is_empty()
        {
            token = t.to_string();
        }
        // Plain or TLS (`--tls-cert`): the address either way.
        let line = line.replacen("https://", "http://", 1);
        if let Some(rest) = line.strip_prefix("toolgate: agents connect to http://") {
            agents = rest.trim().parse().ok();
        }
        if let Some(rest) = line.strip_prefix("toolgate: serving MCP on http://") {
            break rest.split('/').next().unwrap().parse().unwrap();
        }
    };
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if let Some(f) = stdout_copy.as_mut() {
                let _ = writeln!(f, "{line}");
            }
        }
    });
    // The demo token is printed only on the first start: keep it for restarts.
    std::fs::write(data_dir.path().join("demo-token"), &token).unwrap();
    let database = extra.iter().position(|a| *a == "--database").map(|i| extra[i + 1].to_string());
    Server { child, addr, agents: agents.unwrap_or(addr), data_dir, token, database }
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the server (SIGTERM, as an operator would) and hands back its data dir.
    pub fn stop(mut self) -> tempfile::TempDir {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let _ = self.child.wait();
        let dir = tempfile::tempdir().unwrap();
        std::mem::replace(&mut self.data_dir, dir)
    }

    /// Kills the server at once (SIGKILL: no drain, no goodbye) and hands back its data dir.
    pub fn crash(mut self) -> tempfile::TempDir {
        // Child::kill sends SIGKILL with one system call: no time for the server to catch up.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let dir = tempfile::tempdir().unwrap();
        std::mem::replace(&mut self.data_dir, dir)
    }

    /// Any HTTP request to any path, with an optional bearer token.
    pub fn http(&self, method: &str, path: &str, token: Option<&str>, body: Option<&str>) -> Response {
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers: Vec<(&str, &str)> = Vec::new();
        if let Some(a) = &auth {
            headers.push(("Authorization", a.as_str()));
        }
        request_to(self.addr, method, path, &headers, body)
    }

    /// Waits for the process to end; its exit code (None on timeout or a signal).
    pub fn wait_for_exit(mut self, timeout: Duration) -> Option<i32> {
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// `toolgate token create` against this server's store (works while it runs).
    pub fn token(&self, principal: &str, tier: &str, expires_in: &str) -> String {
        let out = self.cli(&["token", "create", "--principal", principal, "--tier", tier, "--expires-in", expires_in]);
        out.split_whitespace()
            .find(|w| w.starts_with("tg_"))
            .unwrap_or_else(|| panic!("no token in: {out}"))
            .to_string()
    }

    /// The flags that name this server's store on a CLI command.
    pub fn store_args(&self) -> Vec<std::ffi::OsString> {
        let mut args = vec!["--data-dir".into(), self.data_dir.path().as_os_str().to_owned()];
        if let Some(database) = &self.database {
            args.extend(["--database".into(), database.into()]);
        }
        args
    }

    pub fn cli(&self, args: &[&str]) -> String {
        let out = self.cli_output(args);
        assert!(out.status.success(), "toolgate {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// A console command on this server's store, whatever its outcome.
    pub fn cli_output(&self, args: &[&str]) -> std::process::Output {
        Command::new(bin()).args(args).args(self.store_args()).output().unwrap()
    }

    /// POST a JSON body with the demo token and the given extra headers.
    pub fn post(&self, headers: &[(&str, &str)], body: &str) -> Response {
        let mut all = vec![("Authorization", format!("Bearer {}", self.token))];
        all.extend(headers.iter().map(|(k, v)| (*k, v.to_string())));
        let refs: Vec<(&str, &str)> = all.iter().map(|(k, v)| (*k, v.as_str())).collect();
        request(self.addr, "POST", &refs, Some(body))
    }

    pub fn rpc(&self, headers: &[(&str, &str)], body: Value) -> Response {
        self.post(headers, &body.to_string())
    }
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }

    pub fn error_code(&self) -> i64 {
        self.json()["error"]["code"].as_i64().unwrap_or_else(|| panic!("no JSON-RPC error: {self:?}"))
    }
}

/// Sends one request with `Connection: close` and reads the whole answer.
pub fn request(addr: SocketAddr, method: &str, headers: &[(&str, &str)], body: Option<&str>) -> Response {
    request_to(addr, method, "/mcp", headers, body)
}

pub fn request_to(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Response {
    let mut text = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        text.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    if let Some(body) = body {
        if !has("content-length") && !has("transfer-encoding") {
            text.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        if !has("content-type") {
            text.push_str("Content-Type: application/json\r\n");
        }
        if !has("accept") {
            text.push_str("Accept: application/json, text/event-stream\r\n");
        }
    }
    text.push_str("\r\n");
    if let Some(body) = body {
        text.push_str(body);
    }
    raw(addr, text.as_bytes())
}

/// Sends `bytes` and reads the answer; status 0 when there is none (the server is gone or
/// closed without answering), with the reason as the body.
pub fn raw(addr: SocketAddr, bytes: &[u8]) -> Response {
    match raw_bytes(addr, bytes) {
        Ok((status, headers, body)) => Response { status, headers, body: String::from_utf8_lossy(&body).into_owned() },
        Err(why) => Response { status: 0, headers: Vec::new(), body: why },
    }
}

/// An answer's status, headers and body as it came (a download).
pub type RawAnswer = (u16, Vec<(String, String)>, Vec<u8>);

/// [`raw`] with the body as it came; Err with the reason when there is no answer.
pub fn raw_bytes(addr: SocketAddr, bytes: &[u8]) -> Result<RawAnswer, String> {
    let mut stream = TcpStream::connect(addr).map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // The server may answer and close before reading a refused body: that is the point.
    let _ = stream.write_all(bytes);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let Some(split) = answer.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Err(format!("no HTTP answer: {:?}", String::from_utf8_lossy(&answer)));
    };
    let head = String::from_utf8_lossy(&answer[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines.next().unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    let headers =
        lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).collect();
    Ok((status, headers, answer[split + 4..].to_vec()))
}

pub const MODERN: &str = "2026-07-28";

/// A stateless-era request body.
pub fn modern(id: i64, method: &str, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "toolgate-tests", "version": "1"}
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A 2026-07-28 tools/call of a tool policy.yaml marks `confirm`, its user saying yes to the
/// question it brings: the final answer.
pub fn confirmed_call(s: &Server, token: &str, name: &str, arguments: Value) -> Value {
    let auth = format!("Bearer {token}");
    let send = |extra: Value| {
        let mut params = json!({"name": name, "arguments": arguments});
        params.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
        let mut body = modern(3, "tools/call", params);
        body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
        let mut headers = modern_headers("tools/call", Some(name));
        headers.push(("Authorization", &auth));
        request(s.addr, "POST", &headers, Some(&body.to_string())).json()
    };
    let asked = send(json!({}));
    let Some(state) = asked["result"]["requestState"].as_str() else { return asked };
    let yes = json!({"toolgate_confirm": {"action": "accept", "content": {"toolgate_confirm": true}}});
    send(json!({"inputResponses": yes, "requestState": state}))
}

/// The headers a stateless-era client sends for `method` (and `name` for tools/call).
pub fn modern_headers<'a>(method: &'a str, name: Option<&'a str>) -> Vec<(&'static str, &'a str)> {
    let mut h = vec![("MCP-Protocol-Version", MODERN), ("Mcp-Method", method)];
    if let Some(n) = name {
        h.push(("Mcp-Name", n));
    }
    h
}

/// A handshake session (2025-11-25) of `token`'s principal whose client declared
/// `capabilities`: its Mcp-Session-Id.
pub fn initialize(s: &Server, token: &str, capabilities: Value) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": capabilities,
        "clientInfo": {"name": "toolgate-tests", "version": "1"}}});
    let auth = format!("Bearer {token}");
    let r = request(s.addr, "POST", &[("Authorization", &auth)], Some(&body.to_string()));
    r.header("mcp-session-id").unwrap_or_else(|| panic!("no session: {r:?}")).to_string()
}

/// A tools/call request body (handshake era, id 7).
pub fn call(name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

/// tools/call with `token`, as protocol 2025-11-25 without a session.
pub fn call_as(s: &Server, token: &str, name: &str, arguments: Value) -> Response {
    request(
        s.addr,
        "POST",
        &[("Authorization", &format!("Bearer {token}")), ("MCP-Protocol-Version", "2025-11-25")],
        Some(&call(name, arguments).to_string()),
    )
}

/// An administrator `principal` with an API credential (no MCP tier), for the approval and
/// audit API.
pub fn api_credential(s: &Server, principal: &str) -> String {
    s.cli(&["principal", "add", principal, "--role", "Administrator"]);
    let out = s.cli(&["token", "create", "--principal", principal, "--api"]);
    out.split_whitespace().find(|w| w.starts_with("tg_")).unwrap().to_string()
}

/// A server that also runs its local agent (`--local-agent`): a real agent reading this
/// machine, enrolled over the agent protocol. Returns the server and the agent's id once
/// `list_agents` shows it online (tags act only on real agents).
pub fn start_with_agent(extra: &[&str]) -> (Server, String) {
    let mut args = vec!["--local-agent"];
    args.extend_from_slice(extra);
    let s = start(&args);
    let agent = wait_for_agents(&s, &s.token, 1).remove(0);
    (s, agent)
}

/// Polls `list_agents` (with `token`) until `count` agents are online; their ids, sorted. The
/// bound is generous: agents enroll and report within a second on an idle machine.
pub fn wait_for_agents(s: &Server, token: &str, count: usize) -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let listed = call_as(s, token, "list_agents", json!({"status": "online"})).json();
        let agents = listed["result"]["structuredContent"]["agents"].as_array().cloned().unwrap_or_default();
        if agents.len() >= count {
            let mut ids: Vec<String> = agents.iter().map(|a| a["agent_id"].as_str().unwrap().to_string()).collect();
            ids.sort();
            return ids;
        }
        assert!(std::time::Instant::now() < deadline, "fewer than {count} agents online after 60 s: {listed}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

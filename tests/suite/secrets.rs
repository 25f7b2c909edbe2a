//! Plugin secrets sealed under the key-encryption key (docs/secrets.md), against the real
//! binary: write-only over MCP (never in an answer, an audit row, a log line, a metric or the
//! database file), refused on a server without a key, rotated to a new KEK version and
//! rewrapped with kill -9 in the middle: nothing lost, nothing wrapped twice, every secret
//! still opens.

use crate::common;

use common::agents::{approval_id, approve, approved};
use common::{Server, call_as};
use serde_json::{Value, json};

fn generate(version: u32) -> String {
    let out = std::process::Command::new(common::bin())
        .args(["kek", "generate", "--version", &version.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A server whose key file (in its data dir) holds `entries`.
fn with_kek(entries: &str, logs: &std::path::Path) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let kek = dir.path().join("kek.txt");
    std::fs::write(&kek, entries).unwrap();
    let kek = kek.display().to_string();
    common::start_logging_to(dir, &["--kek-file", &kek], &[], Some(logs))
}

fn kek_file(s: &Server) -> std::path::PathBuf {
    s.data_dir.path().join("kek.txt")
}

fn structured(r: &common::Response) -> Value {
    let v = r.json();
    assert_eq!(v["result"]["isError"], false, "{v}");
    v["result"]["structuredContent"].clone()
}

#[test]
fn a_server_without_a_key_refuses_the_secret_tools_and_names_the_setting() {
    let s = common::start(&[]);
    let token = s.token("admin", "supervised", "1h");
    let r = call_as(&s, &token, "set_plugin_secret", json!({"plugin": "backup", "key": "token", "value": "x"})).json();
    assert_eq!(r["error"]["code"], -32003, "{r}");
    let text = format!("{} {}", r["error"]["message"], r["error"]["data"]["remediation"]);
    assert!(text.contains("no key-encryption key") && text.contains("--kek-file"), "{text}");
    let status = structured(&call_as(&s, &token, "get_kek_status", json!({})));
    assert_eq!(status["active_version"], Value::Null);
}

#[test]
fn secrets_are_write_only_everywhere() {
    let logs = tempfile::tempdir().unwrap();
    let s = with_kek(&generate(1), logs.path());
    let token = s.token("admin", "supervised", "1h");
    let value = "hunter2-very-secret-value-7f3a";
    let set = |v: &str| {
        structured(&call_as(&s, &token, "set_plugin_secret", json!({"plugin": "backup", "key": "token", "value": v})))
    };
    let first = set(value);
    assert_eq!((first["version"].as_i64(), first["kek_version"].as_i64()), (Some(1), Some(1)), "{first}");
    let second = set(&format!("{value}-2"));
    assert_eq!(second["version"], 2);
    let listed = structured(&call_as(&s, &token, "list_plugin_secrets", json!({"plugin": "backup"})));
    assert_eq!(listed["count"], 1);
    assert_eq!(listed["secrets"][0]["key"], "token");
    // The server's own agent CA key and code-signing key are sealed the same way, and listed
    // by name like the rest.
    let all = structured(&call_as(&s, &token, "list_plugin_secrets", json!({})));
    let names: Vec<String> =
        all["secrets"].as_array().unwrap().iter().map(|m| format!("{}/{}", m["plugin"], m["key"])).collect();
    let expected = [r#""@toolgate"/"agent-ca-1""#, r#""@toolgate"/"code-signing-1""#, r#""backup"/"token""#];
    assert_eq!(names, expected, "{all}");
    // The value is nowhere to be read back.
    let admin = common::api_credential(&s, "auditor");
    let audit = s.http("GET", "/api/v1/audit?limit=1000", Some(&admin), None).body;
    assert!(audit.contains("mcp.set_plugin_secret"), "{audit}");
    let metrics = s.http("GET", "/metrics", Some(&admin), None).body;
    let everything = [listed.to_string(), first.to_string(), second.to_string(), audit, metrics];
    for (i, text) in everything.iter().enumerate() {
        assert!(!text.contains("hunter2"), "surface {i} shows the value: {text}");
    }
    let deleted = approved(
        &s,
        &token,
        &common::console::reviewer(&s, "rita"),
        "delete_plugin_secret",
        json!({"plugin": "backup", "key": "token"}),
    )
    .0;
    assert_eq!((deleted["changed"].as_bool(), deleted["deleted_version"].as_i64()), (Some(true), Some(2)));
    let kept = s.stop();
    for entry in std::fs::read_dir(kept.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(!bytes.windows(7).any(|w| w == b"hunter2"), "{} holds the value", path.display());
        }
    }
    for name in ["stderr", "stdout"] {
        let log = std::fs::read_to_string(logs.path().join(name)).unwrap_or_default();
        assert!(!log.contains("hunter2"), "the {name} log shows the value");
    }
}

#[test]
fn a_rotation_rewraps_every_secret_through_a_kill_9() {
    let logs = tempfile::tempdir().unwrap();
    let s = with_kek(&generate(1), logs.path());
    let token = s.token("admin", "supervised", "1h");
    let count = 240;
    // What the KEK seals: the plugin secrets, the agent CA's key and the code-signing key
    // (docs/trust.md).
    let sealed = count + 2;
    for i in 0..count {
        let args = json!({"plugin": "fleet", "key": format!("k{i:03}"), "value": format!("value-{i}")});
        structured(&call_as(&s, &token, "set_plugin_secret", args));
    }
    let mut reviewer = common::console::reviewer(&s, "rita");
    // Nothing newer in the key file: a clear refusal, not a new version.
    let id = approval_id(&call_as(&s, &token, "rotate_kek", json!({})));
    approve(&s, &reviewer, &id);
    let refused = call_as(&s, &token, "rotate_kek", json!({"approval_id": id})).json();
    assert!(refused.to_string().contains("toolgate kek generate --version 2"), "{refused}");
    // The operator appends version 2; the rotation activates it.
    let mut entries = std::fs::read_to_string(kek_file(&s)).unwrap();
    entries.push_str(&generate(2));
    std::fs::write(kek_file(&s), &entries).unwrap();
    let (rotated, _) = approved(&s, &token, &reviewer, "rotate_kek", json!({}));
    assert_eq!((rotated["activated_version"].as_i64(), rotated["awaiting_rewrap"].as_i64()), (Some(2), Some(sealed)));
    // A secret set now is sealed under version 2 already.
    let fresh =
        structured(&call_as(&s, &token, "set_plugin_secret", json!({"plugin": "fleet", "key": "new", "value": "v"})));
    assert_eq!(fresh["kek_version"], 2);
    // A first run stops after 100; then kill -9 in the middle of the next, wherever it lands.
    let (first, _) = approved(&s, &token, &reviewer, "rewrap_secrets", json!({"batch_size": 7, "max_secrets": 100}));
    assert_eq!((first["rewrapped"].as_i64(), first["remaining"].as_i64()), (Some(100), Some(sealed - 100)), "{first}");
    let id = approval_id(&call_as(&s, &token, "rewrap_secrets", json!({"batch_size": 1})));
    approve(&s, &reviewer, &id);
    let (addr, recall_token) = (s.addr, token.clone());
    let recall = std::thread::spawn(move || {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                          "params": {"name": "rewrap_secrets", "arguments": {"batch_size": 1, "approval_id": id}}});
        let auth = format!("Bearer {recall_token}");
        common::request(
            addr,
            "POST",
            &[("Authorization", &auth), ("MCP-Protocol-Version", "2025-11-25")],
            Some(&body.to_string()),
        )
    });
    std::thread::sleep(std::time::Duration::from_millis(30));
    let dir = s.crash();
    let _ = recall.join();
    let kek = dir.path().join("kek.txt").display().to_string();
    let s = common::start_logging_to(dir, &["--kek-file", &kek], &[], Some(logs.path()));
    // Console sessions live in the server's memory: the reviewer signs in again.
    common::console::sign_in_again(&s, &mut reviewer);
    let status = structured(&call_as(&s, &token, "get_kek_status", json!({})));
    let wrapped = |v: i64| {
        status["versions"].as_array().unwrap().iter().find(|x| x["version"] == v).unwrap()["secrets_wrapped"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(wrapped(1) + wrapped(2), sealed + 1, "no secret lost in the crash: {status}");
    assert!(wrapped(2) >= 101, "the first run's rows stayed rewrapped: {status}");
    let (last, _) = approved(&s, &token, &reviewer, "rewrap_secrets", json!({}));
    assert_eq!(last["remaining"], 0, "{last}");
    assert_eq!(last["skipped_changed"], 0, "nothing was half-done: {last}");
    assert_eq!(last["rewrapped"].as_i64().unwrap(), wrapped(1), "it moved exactly what the crash left: {last}");
    let status = structured(&call_as(&s, &token, "get_kek_status", json!({})));
    assert_eq!(status["awaiting_rewrap"], 0, "{status}");
    // Every secret opens with the key file, and none with version 1 alone.
    let checked = s.cli(&["kek", "check", "--kek-file", &kek]);
    assert!(checked.starts_with(&format!("{} secret(s) open", sealed + 1)), "{checked}");
    let old_only = s.data_dir.path().join("old.txt");
    std::fs::write(&old_only, entries.lines().next().unwrap()).unwrap();
    let refused = s.cli_output(&["kek", "check", "--kek-file", old_only.to_str().unwrap()]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("lacks KEK version 2"), "{refused:?}");
}

#[test]
fn a_replica_given_another_key_is_refused_at_start() {
    let logs = tempfile::tempdir().unwrap();
    let s = with_kek(&generate(1), logs.path());
    let dir = s.stop();
    std::fs::write(dir.path().join("kek.txt"), generate(1)).unwrap();
    let kek = dir.path().join("kek.txt").display().to_string();
    let out = std::process::Command::new(common::bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--kek-file", &kek, "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not the key this database activated as version 1"), "{err}");
}

/// An execution of `definition` on `agent` with `token`, waited for: its status answer.
fn run_and_wait(call: &dyn Fn(&str, Value) -> Value, agent: &str) -> (String, Value) {
    let started = call("execute_instruction", json!({"definition": "workspace_secret_digest", "agent_ids": [agent]}));
    let id = started["execution_id"].as_str().unwrap_or_else(|| panic!("{started}")).to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let status = call("get_execution_status", json!({"execution_id": id}));
        if status["finished"] == true {
            return (id, status);
        }
        assert!(std::time::Instant::now() < deadline, "unfinished: {status}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn sha256_hex(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Every file under `dir` (recursively) that holds `needle`.
fn files_holding(dir: &std::path::Path, needle: &[u8]) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_holding(&path, needle));
        } else if std::fs::read(&path).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle)) {
            found.push(path);
        }
    }
    found
}

#[test]
fn a_declared_secret_reaches_the_agent_over_tls_and_never_comes_back() {
    let tls = common::tls::Localhost::new();
    let kek_dir = tempfile::tempdir().unwrap();
    let kek = kek_dir.path().join("kek.txt");
    std::fs::write(&kek, generate(1)).unwrap();
    let logs = tempfile::tempdir().unwrap();
    let mut extra = tls.serve_args();
    extra.extend(["--kek-file".to_string(), kek.display().to_string(), "--local-agent".into()]);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let s = common::start_logging_to(tempfile::tempdir().unwrap(), &extra, &[], Some(logs.path()));
    let config = tls.client.clone();
    let (supervised, operator) = (s.token("admin", "supervised", "1h"), s.token("admin", "operator", "1h"));
    let call_with = |token: &str, tool: &str, arguments: Value| tls.tool(s.addr, token, tool, arguments);
    let value = "tls-delivered-secret-91c2e7";
    call_with(&supervised, "set_plugin_secret", json!({"plugin": "workspace", "key": "token", "value": value}));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let agent = loop {
        let listed = call_with(&operator, "list_agents", json!({"status": "online"}));
        if let Some(id) = listed["agents"][0]["agent_id"].as_str() {
            break id.to_string();
        }
        assert!(std::time::Instant::now() < deadline, "the local agent is online");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let (id, status) = run_and_wait(&|tool, args| call_with(&operator, tool, args), &agent);
    assert_eq!(status["agents"][0]["status"], "succeeded", "{status}");
    let responses = call_with(&operator, "query_responses", json!({"execution_id": id}));
    let digest = sha256_hex(value);
    assert!(responses.to_string().contains(&digest), "the agent hashed the secret it was given: {responses}");
    let work = s.data_dir.path().join("local-agent").join("work").join("secret-token.sha256");
    assert_eq!(std::fs::read_to_string(&work).unwrap(), digest);
    let api = common::api_credential(&s, "auditor");
    let (_, audit, _) = common::tls::https(s.addr, &config, "/api/v1/audit?limit=1000", Some(&api));
    assert!(audit.contains("mcp.execute_instruction"), "{audit}");
    for (what, text) in [("responses", responses.to_string()), ("status", status.to_string()), ("audit", audit)] {
        assert!(!text.contains(value), "{what} shows the value");
    }
    let data = s.stop();
    let leaked = [files_holding(data.path(), value.as_bytes()), files_holding(logs.path(), value.as_bytes())].concat();
    assert!(leaked.is_empty(), "the value is written to {leaked:?} (the server's store and logs, the agent's state)");
}

#[test]
fn over_plain_http_a_declared_secret_is_refused_with_the_reason() {
    let keys = tempfile::tempdir().unwrap();
    let kek = keys.path().join("kek.txt");
    std::fs::write(&kek, generate(1)).unwrap();
    let (s, agent) = common::start_with_agent(&["--kek-file", kek.to_str().unwrap()]);
    let supervised = s.token("admin", "supervised", "1h");
    structured(&call_as(
        &s,
        &supervised,
        "set_plugin_secret",
        json!({"plugin": "workspace", "key": "token", "value": "x-value"}),
    ));
    let (_, status) = run_and_wait(&|tool, args| structured(&call_as(&s, &s.token, tool, args)), &agent);
    assert_eq!(status["agents"][0]["status"], "refused", "{status}");
    let error = status["agents"][0]["error"].as_str().unwrap();
    assert!(error.contains("travel only over TLS") && error.contains("--tls-cert"), "{error}");
    assert!(!s.data_dir.path().join("local-agent/work/secret-token.sha256").exists(), "nothing ran");
}

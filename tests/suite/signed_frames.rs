//! Signed frames end to end (docs/trust.md), on both backends: a real agent enrolled over the
//! agent listener with mutual TLS pins the CA, and from then on takes only signed frames; an
//! instruction runs on it, then runs again after `issue_code_signing_cert` (with a person's
//! approval) makes the next key; nothing is refused along the way.

use crate::common;

use std::path::Path;

use common::agents::*;
use common::tls::Localhost;
use common::trust::kek_file;
use common::{Server, call_as};
use serde_json::{Value, json};

/// A server on `database` (None: its own SQLite file) whose agent listener has mutual TLS.
fn serve(tls: &Localhost, kek: &str, database: Option<&str>) -> Server {
    let mutual = common::trust::mutual_tls_flags(tls, kek, "127.0.0.1:0");
    let mut flags: Vec<&str> = FAST.to_vec();
    flags.extend(mutual.iter().map(String::as_str));
    if let Some(database) = database {
        flags.extend(["--database", database]);
    }
    common::start(&flags)
}

/// Runs write_marker `name` on `agent_id` (the operator tier runs it at once); its status.
fn run_marker(s: &Server, schemas: &std::collections::HashMap<String, Value>, agent_id: &str, name: &str) -> Value {
    let arguments =
        json!({"definition": "write_marker", "params": {"name": name, "text": "signed"}, "agent_ids": [agent_id]});
    let started = structured(s, schemas, "execute_instruction", arguments);
    wait_finished(s, schemas, &s.token, started["execution_id"].as_str().unwrap())
}

fn signed_frames_run_end_to_end(database: Option<&str>) {
    let tls = Localhost::new();
    let keys = tempfile::tempdir().unwrap();
    let kek = kek_file(keys.path());
    let s = serve(&tls, &kek, database);
    let schemas = output_schemas(&s);
    let states = tempfile::tempdir().unwrap();
    let state_dir = states.path().join("signed-host");
    let url = format!("https://localhost:{}", s.agents.port());
    let token = mint(&s, &["--uses", "1"]);
    let _agent = spawn_agent_with_logs_to(&url, Some(&tls.ca), Some(&token), &state_dir, "signed-host", "true");
    let agent_id = online_by_hostname(&s, &schemas, 1)["signed-host"].clone();
    assert!(state_dir.join("pinned-ca.pem").exists(), "the agent pinned the CA of its first certificate");

    let marker = |name: &str| state_dir.join("work").join(name);
    let first = run_marker(&s, &schemas, &agent_id, "first");
    assert_eq!(first["counts"], json!({"succeeded": 1}), "{first}");
    assert_eq!(std::fs::read_to_string(marker("first")).unwrap(), "signed");

    // The next code-signing key, with a person's approval; the next run is signed with it.
    let rita = common::console::reviewer(&s, "rita");
    let admin = s.token("admin", "supervised", "1d");
    let issued =
        common::console::approved_on(&s, &s, &rita, &admin, "issue_code_signing_cert", json!({"reason": "yearly"}));
    assert_eq!((issued["generation"].as_u64(), issued["ca_generation"].as_u64()), (Some(2), Some(1)), "{issued}");
    let second = run_marker(&s, &schemas, &agent_id, "second");
    assert_eq!(second["counts"], json!({"succeeded": 1}), "{second}");
    assert!(marker("second").exists());

    let audit = |action: &str| {
        let answer = call_as(&s, &admin, "query_audit_log", json!({"action": action})).json();
        answer["result"]["structuredContent"]["entries"].as_array().cloned().unwrap_or_default()
    };
    assert!(audit("agent.frame.refused").is_empty(), "nothing was refused");
    assert_eq!(audit("ca.codesign.issued").len(), 1);
    assert_pinned_once(&state_dir);
}

/// The pinned CA is the one the agent's certificate chains to.
fn assert_pinned_once(state_dir: &Path) {
    let pinned = std::fs::read_to_string(state_dir.join("pinned-ca.pem")).unwrap();
    let held = common::trust::held(state_dir);
    assert!(held["ca_pem"].as_str().unwrap().starts_with(pinned.trim_end()), "{pinned}");
}

#[test]
fn signed_frames_run_end_to_end_on_sqlite() {
    signed_frames_run_end_to_end(None);
}

#[test]
fn signed_frames_run_end_to_end_on_postgres() {
    let database = common::replicas::fresh_database("signed_frames");
    signed_frames_run_end_to_end(Some(&database));
}

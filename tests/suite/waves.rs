//! Waves (issue 46): a change sent a batch of hosts at a time, the next wave only once the
//! last has ended within the failure budget. Real agents: three of the build machine's for
//! the pacing and the kill switch, three booted Debian endpoints for the failure budget.

use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use crate::common;
use crate::streaming::call_with;
use common::agents::{FAST, Fleet, PATIENCE, fleet_of_three, output_schemas, structured, wait_finished};
use common::sse::events;
use common::start;
use common::testbed::Bed;

fn by_hostname(status: &Value, field: &str) -> Vec<(String, Value)> {
    let mut rows: Vec<(String, Value)> = status["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["hostname"].as_str().unwrap().to_string(), a[field].clone()))
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    rows
}

#[test]
fn waves_go_one_after_another_and_progress_counts_them() {
    let Fleet { s, schemas, states, agents: _agents, ids } = fleet_of_three(FAST);
    let order = [&ids["fleet-a"], &ids["fleet-b"], &ids["fleet-c"]];
    let arguments = json!({"definition": "write_marker", "params": {"name": "waved"}, "agent_ids": order,
                           "rollout": {"batch": 1, "pause_ms": 400}});
    let r = call_with(
        &s,
        "application/json, text/event-stream",
        "execute_instruction",
        arguments,
        json!({"progressToken": "w"}),
    );
    let events = events(&r);
    let (progress, result) = events.split_at(events.len() - 1);
    let messages: Vec<&str> = progress.iter().filter_map(|p| p["params"]["message"].as_str()).collect();
    for wave in ["wave 1 of 3", "wave 2 of 3", "wave 3 of 3"] {
        assert!(messages.iter().any(|m| m.starts_with(wave)), "{wave} in {messages:?}");
    }
    let content = &result[0]["result"]["structuredContent"];
    assert_eq!(content["counts"], json!({"succeeded": 3}), "{content}");
    let status = structured(&s, &schemas, "get_execution_status", json!({"execution_id": content["execution_id"]}));
    assert_eq!(status["rollout"], json!({"batch": 1, "max_failures": 0, "pause_ms": 400, "wave": 3, "waves": 3}));
    // Each host wrote its marker at least the pause after the one before.
    let written: Vec<SystemTime> = ["fleet-a", "fleet-b", "fleet-c"]
        .iter()
        .map(|name| std::fs::metadata(states.path().join(name).join("work/waved")).unwrap().modified().unwrap())
        .collect();
    for pair in written.windows(2) {
        let gap = pair[1].duration_since(pair[0]).expect("written in wave order");
        assert!(gap >= Duration::from_millis(400), "{gap:?} between two waves");
    }
}

#[test]
fn a_kill_switch_engaged_mid_rollout_stops_the_waves_not_started() {
    let Fleet { s, schemas, states, agents: _agents, ids } = fleet_of_three(FAST);
    let admin = s.token("admin", "supervised", "1d");
    let order = [&ids["fleet-a"], &ids["fleet-b"], &ids["fleet-c"]];
    let arguments = json!({"definition": "write_marker", "params": {"name": "halted"}, "agent_ids": order,
                           "rollout": {"batch": 1, "pause_ms": 600000}});
    let started = structured(&s, &schemas, "execute_instruction", arguments);
    let execution = started["execution_id"].as_str().unwrap();
    assert_eq!(started["delivered_now"], 1, "only the first wave is sent: {started}");
    let deadline = Instant::now() + PATIENCE;
    while !states.path().join("fleet-a/work/halted").exists() {
        assert!(Instant::now() < deadline, "the first wave never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    let arguments = json!({"plugin": "workspace", "enabled": true, "reason": "incident 46"});
    common::confirmed_call(&s, &admin, "set_plugin_kill_switch", arguments);
    let status = wait_finished(&s, &schemas, &s.token, execution);
    let statuses = by_hostname(&status, "status");
    assert_eq!(
        statuses.iter().map(|(_, s)| s.as_str().unwrap()).collect::<Vec<_>>(),
        ["succeeded", "skipped", "skipped"],
        "{status}"
    );
    for (host, error) in by_hostname(&status, "error").into_iter().skip(1) {
        let error = error.as_str().unwrap_or_default();
        assert!(error.contains("kill switch of plugin `workspace` is engaged (incident 46"), "{host}: {error}");
    }
    for name in ["fleet-b", "fleet-c"] {
        assert!(!states.path().join(name).join("work/halted").exists(), "{name} never ran it");
    }
}

/// The issue's own case, on booted Debian hosts: batch 1, a change that fails on the first
/// (its unit exists only on the other two), and the other two are skipped, untouched.
#[test]
fn past_the_failure_budget_the_rest_of_the_rollout_is_skipped() {
    let s = start(FAST);
    let schemas = output_schemas(&s);
    let (bed, ids) = Bed::enrolled(&s, &["wave-a", "wave-b", "wave-c"]);
    let unit = "[Service]\nExecStart=/bin/sleep infinity\n";
    for e in &bed.endpoints[1..] {
        std::fs::write(e.file("/etc/systemd/system/wave-probe.service"), unit).unwrap();
        e.run(&["systemctl", "daemon-reload"]);
    }
    let order = [&ids["wave-a"], &ids["wave-b"], &ids["wave-c"]];
    let arguments = json!({"definition": "service_action", "params": {"unit": "wave-probe", "action": "start"},
                           "agent_ids": order, "rollout": {"batch": 1, "max_failures": 0}});
    let started = structured(&s, &schemas, "execute_instruction", arguments);
    let status = wait_finished(&s, &schemas, &s.token, started["execution_id"].as_str().unwrap());
    let statuses: Vec<(String, Value)> = by_hostname(&status, "status");
    assert_eq!(statuses.iter().map(|(_, s)| s.as_str().unwrap()).collect::<Vec<_>>(), ["failed", "skipped", "skipped"]);
    for (host, error) in by_hostname(&status, "error").into_iter().skip(1) {
        let error = error.as_str().unwrap_or_default();
        assert!(error.contains("1 host(s) did not succeed") && error.contains("max_failures (0)"), "{host}: {error}");
    }
    // Audited per target: the one that ran, and only it (the skipped ones changed nothing).
    let execution = started["execution_id"].as_str().unwrap();
    let deadline = Instant::now() + PATIENCE;
    let rows = loop {
        let log = structured(&s, &schemas, "query_audit_log", json!({"target_type": "Execution"}));
        let rows: Vec<Value> =
            log["entries"].as_array().unwrap().iter().filter(|e| e["target"] == execution).cloned().collect();
        if !rows.is_empty() || Instant::now() > deadline {
            break rows;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((&rows[0]["action"], &rows[0]["result"]), (&json!("execution.change"), &json!("failure")), "{rows:?}");
    assert_eq!(rows[0]["agents"], json!([ids["wave-a"]]), "{rows:?}");
    assert!(
        rows[0]["detail"].as_str().unwrap().starts_with("service_action (systemd.service_action): failed"),
        "{rows:?}"
    );
    for e in &bed.endpoints[1..] {
        let active = e.exec(&["systemctl", "is-active", "wave-probe"]);
        assert_eq!(String::from_utf8_lossy(&active.stdout).trim(), "inactive", "{} was never started", e.name);
    }
}

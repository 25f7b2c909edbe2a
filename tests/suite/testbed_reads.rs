//! What an administrator asks an assistant about a Linux host, read by agents installed from
//! their package on booted Debian endpoints (the test bed): which services failed and why
//! (the journal), how a service is doing, what updates are pending, whether it needs a reboot.
//! And on a host without systemd, a clear "not available" per target instead of an empty answer.

use std::path::Path;

use serde_json::{Value, json};

use crate::common;
use common::agents::{
    FAST, mint, online_by_hostname, output_schemas, run_instruction, spawn_agent, structured, wait_for_table,
};
use common::apt::{Repository, probe_package};
use common::start;
use common::testbed::{Bed, Endpoint};

fn rows_from<'a>(rows: &'a [Value], hostname: &str) -> Vec<&'a Value> {
    rows.iter().filter(|r| r["hostname"] == hostname).map(|r| &r["values"]).collect()
}

fn endpoint<'a>(bed: &'a Bed, name: &str) -> &'a Endpoint {
    bed.endpoints.iter().find(|e| e.name == name).unwrap()
}

#[test]
fn services_the_journal_pending_updates_and_the_reboot_marker_of_booted_hosts() {
    let s = start(FAST);
    let schemas = output_schemas(&s);
    let (bed, ids) = Bed::enrolled(&s, &["host-a", "host-b", "host-c"]);
    let all: Vec<&str> = ids.values().map(String::as_str).collect();

    // cron, a real service, on all three.
    let (status, rows) = run_instruction(&s, &schemas, "service_status", json!({"unit": "cron"}), &all);
    assert_eq!(status["counts"], json!({"succeeded": 3}), "{status}");
    assert_eq!(rows.len(), 3, "{rows:?}");
    for row in &rows {
        let v = &row["values"];
        assert_eq!(
            (v["unit"].as_str(), v["active_state"].as_str(), v["sub_state"].as_str()),
            (Some("cron.service"), Some("active"), Some("running")),
            "{row}"
        );
        assert!(v["main_pid"].as_i64() > Some(0) && v["since_ms"].as_i64() > Some(0), "{row}");
    }

    // A glob: every matching unit, loaded or installed; the template getty@.service is not one.
    let one = [ids["host-a"].as_str()];
    let (status, rows) = run_instruction(&s, &schemas, "service_status", json!({"unit": "getty*"}), &one);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");
    let names: Vec<&str> = rows.iter().filter_map(|r| r["values"]["unit"].as_str()).collect();
    assert!(names.contains(&"getty.target") && names.contains(&"getty@tty1.service"), "{names:?}");
    assert!(!names.contains(&"getty@.service"), "{names:?}");

    // The agents' facts name the init system, and their inventory holds the services.
    let details = structured(&s, &schemas, "get_agent_details", json!({"agent_id": ids["host-a"]}));
    assert_eq!(details["facts"]["init_system"], "systemd", "{details}");
    assert_eq!(details["facts"]["reboot_required"], false, "{details}");
    wait_for_table(&s, &schemas, &ids["host-a"], "services");
    let services = structured(
        &s,
        &schemas,
        "get_agent_inventory",
        json!({"agent_id": ids["host-a"], "table": "services", "limit": 1000}),
    );
    let cron = services["rows"].as_array().unwrap().iter().find(|r| r["name"] == "cron.service");
    assert_eq!(cron.map(|r| r["active_state"].clone()), Some(json!("active")), "{services}");
    // ... and every unit of every type, with its unit file's state; templates are not units.
    wait_for_table(&s, &schemas, &ids["host-a"], "systemd_units");
    let units = structured(
        &s,
        &schemas,
        "get_agent_inventory",
        json!({"agent_id": ids["host-a"], "table": "systemd_units", "limit": 1000}),
    );
    let units = units["rows"].as_array().unwrap();
    let unit = |name: &str| units.iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("{name}: {units:?}"));
    let cron = unit("cron.service");
    assert_eq!((&cron["unit_type"], &cron["unit_file_state"]), (&json!("service"), &json!("enabled")), "{cron}");
    assert_eq!(unit("apt-daily.timer")["unit_type"], "timer");
    assert_eq!(unit("-.mount")["active_state"], "active", "the root mount");
    assert!(units.iter().all(|r| !r["name"].as_str().unwrap().contains("@.")), "no templates");
    assert!(units.iter().any(|r| r["unit_file_state"] == "disabled"), "installed files not enabled too");

    // A unit broken on host-b: failed, with why and when, and its journal says what broke.
    let b = endpoint(&bed, "host-b");
    let unit = "[Unit]\nDescription=A probe that cannot start\n[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo \"probe: cannot open /etc/probe.conf\" >&2; exit 3'\n";
    std::fs::write(b.file("/etc/systemd/system/probe-broken.service"), unit).unwrap();
    b.run(&["systemctl", "daemon-reload"]);
    assert!(!b.exec(&["systemctl", "start", "probe-broken.service"]).status.success(), "it fails to start");
    let (status, rows) = run_instruction(&s, &schemas, "failed_units", json!({}), &all);
    assert_eq!(status["counts"], json!({"succeeded": 3}), "{status}");
    // Only host-b has the broken probe. (A unit of the image itself may fail too when many
    // endpoints boot at once: seen once, systemd-user-sessions with status 219, CGROUP.)
    let probes: Vec<&Value> = rows.iter().filter(|r| r["values"]["unit"] == "probe-broken.service").collect();
    assert_eq!(probes.len(), 1, "{rows:?}");
    assert_eq!(probes[0]["hostname"], "host-b", "{rows:?}");
    let failed = &probes[0]["values"];
    assert_eq!(
        (failed["unit"].as_str(), failed["result"].as_str(), failed["exit_status"].as_i64()),
        (Some("probe-broken.service"), Some("exit-code"), Some(3)),
        "{failed}"
    );
    assert!(failed["failed_at_ms"].as_i64() > Some(0));
    let (_, journal) = run_instruction(
        &s,
        &schemas,
        "journal_tail",
        json!({"unit": "probe-broken", "priority": "debug"}),
        &[&ids["host-b"]],
    );
    let messages: Vec<&str> = journal.iter().filter_map(|r| r["values"]["message"].as_str()).collect();
    assert!(messages.iter().any(|m| m.contains("cannot open /etc/probe.conf")), "the unit's own words: {messages:?}");
    assert!(messages.iter().any(|m| m.contains("exit-code")), "systemd's verdict: {messages:?}");
    let (_, bounded) = run_instruction(&s, &schemas, "journal_tail", json!({"lines": 2}), &[&ids["host-b"]]);
    assert_eq!(bounded.len(), 2, "bounded in entries: {bounded:?}");

    // host-c waits for a reboot; the others do not.
    let c = endpoint(&bed, "host-c");
    c.run(&["sh", "-c", "echo '*** System restart required ***' >/run/reboot-required && echo linux-image-probe >/run/reboot-required.pkgs"]);
    let (_, rows) = run_instruction(&s, &schemas, "reboot_required", json!({}), &all);
    for e in &bed.endpoints {
        let v = rows_from(&rows, &e.name)[0];
        let waits = e.name == "host-c";
        assert_eq!(v["required"], i64::from(waits), "{}: {v}", e.name);
        assert_eq!(v["packages"], if waits { "linux-image-probe" } else { "" }, "{v}");
    }

    // host-a has the probe package at 1.0 and a source that offers 2.0.
    let a = endpoint(&bed, "host-a");
    let packages = tempfile::tempdir().unwrap();
    a.install(&probe_package(packages.path(), "1.0"));
    let repository = Repository::serve(packages.path(), &[&probe_package(packages.path(), "2.0")]);
    repository.use_on(a);
    let (status, rows) = run_instruction(&s, &schemas, "pending_updates", json!({"name": "toolgate-*"}), &all);
    assert_eq!(status["counts"], json!({"succeeded": 3}), "{status}");
    assert_eq!(rows.len(), 1, "only host-a has a newer version on offer: {rows:?}");
    let update = rows_from(&rows, "host-a")[0];
    assert_eq!(
        (update["name"].as_str(), update["installed_version"].as_str(), update["candidate_version"].as_str()),
        (Some("toolgate-probe"), Some("1.0"), Some("2.0")),
        "{update}"
    );
    assert_eq!(update["security"], 0, "{update}");
}

#[test]
fn a_host_without_systemd_says_so_per_target() {
    // The build machine's agents run in a namespace of it, and it has no systemd.
    assert!(!Path::new("/run/systemd/system").exists(), "this test needs a host whose init is not systemd");
    let s = start(FAST);
    let schemas = output_schemas(&s);
    let states = tempfile::tempdir().unwrap();
    let _agent = spawn_agent(&s, Some(&mint(&s, &[])), &states.path().join("plain"), Some("plain-host"));
    let ids = online_by_hostname(&s, &schemas, 1);
    let details = structured(&s, &schemas, "get_agent_details", json!({"agent_id": ids["plain-host"]}));
    let init = details["facts"]["init_system"].as_str().unwrap_or_default();
    assert!(!init.is_empty() && init != "systemd", "PID 1's name: {details}");
    for (definition, params) in
        [("failed_units", json!({})), ("service_status", json!({"unit": "cron"})), ("journal_tail", json!({}))]
    {
        let (status, rows) = run_instruction(&s, &schemas, definition, params, &[&ids["plain-host"]]);
        assert_eq!(status["counts"], json!({"failed": 1}), "{definition}: {status}");
        let error = status["agents"][0]["error"].as_str().unwrap_or_default();
        assert!(error.contains("not available on this host: no systemd"), "{definition}: {error}");
        assert!(rows.is_empty());
    }
}

//! The changes administrators make (issue 46), on booted Debian endpoints with the agent
//! installed from its package: a unit restarted, stopped and started, a failed one brought
//! back; a process ended, and one whose PID names another process refused. Each is planned
//! first (`plan_only`: what it would do, changing nothing), then applied; every effect is read
//! back from the host itself, never only from the answer.

use serde_json::{Value, json};

use crate::common;
use common::agents::{FAST, mint, online_by_hostname, output_schemas, run_execution, run_instruction, wait_finished};
use common::start;
use common::testbed::{Bed, Endpoint};

/// One property of a unit, as systemd on the endpoint says it.
fn unit_property(e: &Endpoint, unit: &str, property: &str) -> String {
    e.run(&["systemctl", "show", "--value", "--property", property, unit]).trim().to_string()
}

/// Plans `definition` on `agents`: the final status and the plan rows' values.
fn plan(
    s: &common::Server,
    schemas: &std::collections::HashMap<String, Value>,
    definition: &str,
    params: Value,
    agents: &[&str],
) -> (Value, Vec<Value>) {
    let arguments = json!({"definition": definition, "params": params, "agent_ids": agents, "plan_only": true});
    let (status, rows) = run_execution(s, schemas, arguments);
    (status, rows.iter().map(|r| r["values"].clone()).collect())
}

#[test]
fn units_are_planned_then_restarted_stopped_and_started_and_a_failed_one_comes_back() {
    let s = start(FAST);
    let schemas = output_schemas(&s);
    let (bed, ids) = Bed::enrolled(&s, &["chg-a", "chg-b"]);
    let (a, a_id) = (&bed.endpoints[0], ids["chg-a"].as_str());
    let both: Vec<&str> = ids.values().map(String::as_str).collect();

    // The plan: on both hosts, cron would be restarted, active before and after; nothing moves.
    let pid_before = unit_property(a, "cron", "MainPID");
    let run_before = unit_property(a, "cron", "InvocationID");
    let restart = json!({"unit": "cron", "action": "restart"});
    let (status, rows) = plan(&s, &schemas, "service_action", restart.clone(), &both);
    assert_eq!(status["counts"], json!({"succeeded": 2}), "{status}");
    for row in &rows {
        assert_eq!(
            (&row["unit"], &row["action"], &row["active_state_now"], &row["active_state_after"]),
            (&json!("cron.service"), &json!("restart"), &json!("active"), &json!("active")),
            "{row}"
        );
    }
    assert_eq!(unit_property(a, "cron", "MainPID"), pid_before, "a plan changes nothing");

    // Applied on chg-a: a new main process and a new invocation, as the host says.
    let (status, rows) = run_instruction(&s, &schemas, "service_action", restart, &[a_id]);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");
    let (pid_after, run_after) = (unit_property(a, "cron", "MainPID"), unit_property(a, "cron", "InvocationID"));
    assert!(
        pid_after != pid_before && run_after != run_before,
        "{pid_before} -> {pid_after}, {run_before} -> {run_after}"
    );
    assert_eq!(rows[0]["values"]["main_pid"], pid_after.parse::<i64>().unwrap(), "{rows:?}");
    assert_eq!(rows[0]["values"]["invocation_id"], run_after.as_str(), "{rows:?}");
    assert_ne!(unit_property(&bed.endpoints[1], "cron", "MainPID"), "0", "chg-b untouched, still running");

    // Stopped, then started again.
    let (status, _) =
        run_instruction(&s, &schemas, "service_action", json!({"unit": "cron", "action": "stop"}), &[a_id]);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");
    assert_eq!(unit_property(a, "cron", "ActiveState"), "inactive");
    let (_, rows) = plan(&s, &schemas, "service_action", json!({"unit": "cron", "action": "start"}), &[a_id]);
    assert_eq!((&rows[0]["active_state_now"], &rows[0]["active_state_after"]), (&json!("inactive"), &json!("active")));
    run_instruction(&s, &schemas, "service_action", json!({"unit": "cron", "action": "start"}), &[a_id]);
    assert_eq!(unit_property(a, "cron", "ActiveState"), "active");

    // A unit that fails for want of its configuration; fixed, a restart brings it back and
    // it leaves failed_units.
    let unit = "[Unit]\nDescription=A probe that needs /etc/probe.conf\n[Service]\nExecStart=/bin/sh -c 'test -f /etc/probe.conf && exec sleep infinity'\n";
    std::fs::write(a.file("/etc/systemd/system/probe-needs-conf.service"), unit).unwrap();
    a.run(&["systemctl", "daemon-reload"]);
    let _ = a.exec(&["systemctl", "start", "probe-needs-conf.service"]);
    let failed = |rows: &[Value]| rows.iter().any(|r| r["values"]["unit"] == "probe-needs-conf.service");
    let deadline = std::time::Instant::now() + common::agents::PATIENCE;
    while !failed(&run_instruction(&s, &schemas, "failed_units", json!({}), &[a_id]).1) {
        assert!(std::time::Instant::now() < deadline, "the probe never failed");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    std::fs::write(a.file("/etc/probe.conf"), "ready\n").unwrap();
    let fix = json!({"unit": "probe-needs-conf", "action": "restart"});
    let (_, rows) = plan(&s, &schemas, "service_action", fix.clone(), &[a_id]);
    assert_eq!((&rows[0]["active_state_now"], &rows[0]["active_state_after"]), (&json!("failed"), &json!("active")));
    let (status, _) = run_instruction(&s, &schemas, "service_action", fix, &[a_id]);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");
    assert_eq!(unit_property(a, "probe-needs-conf", "ActiveState"), "active");
    assert!(!failed(&run_instruction(&s, &schemas, "failed_units", json!({}), &[a_id]).1), "it left failed_units");

    // What cannot be done fails at the plan, saying why; a read has no plan.
    let (status, _) = plan(&s, &schemas, "service_action", json!({"unit": "no-such-unit", "action": "start"}), &[a_id]);
    assert_eq!(status["counts"], json!({"failed": 1}), "{status}");
    let answer = common::call_as(
        &s,
        &s.token,
        "execute_instruction",
        json!({"definition": "failed_units", "agent_ids": [a_id], "plan_only": true}),
    )
    .json();
    assert!(answer["result"]["content"][0]["text"].as_str().unwrap().contains("only a change has a plan"), "{answer}");
}

#[test]
fn a_process_is_ended_by_pid_and_start_time_and_a_recycled_pid_is_never_hit() {
    let s = start(FAST);
    let schemas = output_schemas(&s);
    let (bed, ids) = Bed::enrolled(&s, &["chg-kill"]);
    let (e, id) = (&bed.endpoints[0], ids["chg-kill"].clone());
    e.run(&["systemd-run", "--unit=probe-sleeper", "/bin/sleep", "100000"]);
    let pid: i64 = unit_property(e, "probe-sleeper", "MainPID").parse().unwrap();

    // running_processes gives the start time kill_process needs.
    let (_, rows) = run_instruction(&s, &schemas, "running_processes", json!({"name": "sleep"}), &[&id]);
    let row = rows.iter().map(|r| &r["values"]).find(|v| v["pid"] == pid).unwrap_or_else(|| panic!("{rows:?}"));
    let started = row["start_time_ms"].as_i64().unwrap();

    // Another start time: the PID would name a different process; nothing is signalled.
    let wrong = json!({"pid": pid, "start_time_ms": started - 1000});
    let (status, _) = run_instruction(&s, &schemas, "kill_process", wrong, &[&id]);
    assert_eq!(status["counts"], json!({"failed": 1}), "{status}");
    let error = status["agents"][0]["error"].as_str().unwrap_or_default().to_string();
    assert!(error.contains("different process"), "{status}");
    assert_eq!(unit_property(e, "probe-sleeper", "ActiveState"), "active", "still running");

    let right = json!({"pid": pid, "start_time_ms": started, "grace_ms": 2000});
    let (_, planned) = plan(&s, &schemas, "kill_process", right.clone(), &[&id]);
    assert_eq!((&planned[0]["pid"], &planned[0]["name"]), (&json!(pid), &json!("sleep")), "{planned:?}");
    let (status, rows) = run_instruction(&s, &schemas, "kill_process", right, &[&id]);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");
    assert_eq!(rows[0]["values"]["outcome"], "terminated", "{rows:?}");
    assert!(!e.exec(&["kill", "-0", &pid.to_string()]).status.success(), "process {pid} is gone from the host");
    // Never the init system: PID 1 is refused by the server before anything is sent, and a
    // glob never matches it (here nothing else is named `systemd`).
    let by_pid = json!({"definition": "kill_process", "params": {"pid": 1, "start_time_ms": 0}, "agent_ids": [id]});
    let answer = common::call_as(&s, &s.token, "execute_instruction", by_pid).json();
    assert!(answer["result"]["content"][0]["text"].as_str().unwrap().contains("/params/pid"), "{answer}");
    let (status, _) = run_instruction(&s, &schemas, "kill_process", json!({"name": "systemd", "max_count": 5}), &[&id]);
    assert_eq!(status["counts"], json!({"failed": 1}), "{status}");
    let error = status["agents"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("no process named like `systemd`"), "{status}");
    assert!(e.exec(&["kill", "-0", "1"]).status.success());
}

/// A plan is a read: in the supervised tier, where a change waits for a person, the same call
/// with `plan_only` is answered at once, changes nothing, and mints no ticket.
#[test]
fn a_plan_needs_no_approval_and_changes_nothing() {
    let s = start(FAST);
    let schemas = output_schemas(&s);
    let states = tempfile::tempdir().unwrap();
    let state_dir = states.path().join("planner");
    let _agent = common::agents::spawn_agent(&s, Some(&mint(&s, &[])), &state_dir, Some("planner"));
    let id = online_by_hostname(&s, &schemas, 1)["planner"].clone();
    let supervised = s.token("admin", "supervised", "1h");
    let change =
        json!({"definition": "write_marker", "params": {"name": "planned", "text": "hello"}, "agent_ids": [id]});

    let mut planned = change.clone();
    planned["plan_only"] = json!(true);
    let started = common::agents::structured_as(&s, &schemas, &supervised, "execute_instruction", planned);
    let execution = started["execution_id"].as_str().unwrap();
    let status = wait_finished(&s, &schemas, &supervised, execution);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");
    let rows =
        common::agents::structured_as(&s, &schemas, &supervised, "query_responses", json!({"execution_id": execution}));
    let plan = &rows["rows"][0]["values"];
    assert_eq!((&plan["size_bytes_now"], &plan["size_bytes_after"]), (&json!(-1), &json!(5)), "{rows}");
    assert!(plan["file"].as_str().unwrap().ends_with("/work/planned"), "{plan}");
    assert!(!state_dir.join("work/planned").exists(), "a plan writes nothing");

    // The change itself still waits for a person.
    let held = common::call_as(&s, &supervised, "execute_instruction", change).json();
    assert_eq!(held["error"]["code"], -32006, "{held}");
}

/// Held for a person (supervised): the ticket's call runs once as a plan on every host, the
/// approvals page shows the plans grouped, approving binds the ticket to them, and on the
/// recall a host whose plan changed meanwhile (its unit already stopped by hand) changes
/// nothing and says so, while the other applies the approved plan.
#[test]
fn an_approved_plan_is_applied_and_a_changed_one_is_not() {
    let s = start(FAST);
    let schemas = output_schemas(&s);
    let (bed, ids) = Bed::enrolled(&s, &["held-a", "held-b"]);
    let (a, b) = (&bed.endpoints[0], &bed.endpoints[1]);
    let supervised = s.token("admin", "supervised", "1h");
    let reviewer = common::console::reviewer(&s, "rita");
    let stop = json!({"definition": "service_action", "params": {"unit": "cron", "action": "stop"}, "scope": "hostname ~ \"held-*\""});
    let ticket = common::agents::approval_id(&common::call_as(&s, &supervised, "execute_instruction", stop.clone()));
    assert_eq!(unit_property(a, "cron", "ActiveState"), "active", "minting a ticket changes nothing");

    // The page shows one plan for both hosts, and the form carries its digest.
    let (page, digest) = common::console::page_with_plans(&s, &reviewer, "2 hosts with this plan");
    assert!(page.contains("cron.service"), "{page}");
    assert!(page.contains("Touches: ") && page.contains("The opposite action"), "{page}");
    // Plans other than those shown are not approved.
    let stale =
        common::console::decide(&s, &reviewer, &ticket, "approve", json!({"comment": "ok", "plans": "0".repeat(64)}));
    assert_eq!(stale.status, 409, "{stale:?}");
    assert!(stale.body.contains("the plans changed since they were shown"), "{stale:?}");
    let approved =
        common::console::decide(&s, &reviewer, &ticket, "approve", json!({"comment": "ok", "plans": digest}));
    assert_eq!(approved.status, 200, "{approved:?}");

    // Meanwhile someone stops cron on held-b by hand: its plan is no longer the approved one.
    b.run(&["systemctl", "stop", "cron"]);
    let mut recall = stop;
    recall["approval_id"] = json!(ticket);
    let started = common::agents::structured_as(&s, &schemas, &supervised, "execute_instruction", recall);
    let status = wait_finished(&s, &schemas, &supervised, started["execution_id"].as_str().unwrap());
    assert_eq!(status["counts"], json!({"succeeded": 1, "plan_changed": 1}), "{status}");
    let changed =
        status["agents"].as_array().unwrap().iter().find(|t| t["agent_id"] == ids["held-b"].as_str()).unwrap();
    assert_eq!(changed["status"], "plan_changed", "{status}");
    assert!(changed["error"].as_str().unwrap().contains("nothing was changed"), "{status}");
    assert_eq!(unit_property(a, "cron", "ActiveState"), "inactive", "held-a applied the approved plan");
    let rows = common::agents::structured_as(
        &s,
        &schemas,
        &supervised,
        "query_responses",
        json!({"execution_id": started["execution_id"], "agent_id": ids["held-b"]}),
    );
    assert_eq!(rows["rows"][0]["values"]["active_state_now"], "inactive", "held-b's new plan: {rows}");
}

/// A line managed in a configuration file: refused before anything is sent until the files
/// plugin's `allowed_paths` names its directory; then its plan is the diff, applying writes
/// it (keeping mode and owner) with a backup, and restore_backup puts the file back.
#[test]
fn a_managed_line_is_planned_as_a_diff_applied_and_restored_only_where_allowed() {
    let s = start(FAST);
    let schemas = output_schemas(&s);
    let (bed, ids) = Bed::enrolled(&s, &["files-a"]);
    let (e, id) = (&bed.endpoints[0], ids["files-a"].as_str());
    e.run(&[
        "sh",
        "-c",
        "mkdir -p /etc/probe.d && printf 'a = 1\\n' >/etc/probe.d/app.conf && chmod 640 /etc/probe.d/app.conf",
    ]);
    let line = json!({"path": "/etc/probe.d/app.conf", "line": "b = 2"});
    let arguments = json!({"definition": "managed_line", "params": line, "agent_ids": [id]});
    let refused = common::agents::refusal(&common::call_as(&s, &s.token, "execute_instruction", arguments));
    assert!(refused.contains("may change no path") && refused.contains("nothing was sent"), "{refused}");

    let admin = s.token("admin", "supervised", "1h");
    let allow = |dirs: &str| {
        let arguments = json!({"plugin": "files", "key": "allowed_paths", "value": dirs});
        let answer = common::confirmed_call(&s, &admin, "set_plugin_config", arguments);
        assert_eq!(answer["result"]["isError"], false, "{answer}");
    };
    allow("/srv/elsewhere");
    let outside = json!({"definition": "managed_line", "params": line, "agent_ids": [id]});
    let refused = common::agents::refusal(&common::call_as(&s, &s.token, "execute_instruction", outside));
    assert!(refused.contains("outside the allowed paths"), "{refused}");
    allow("/etc/probe.d");

    let (_, planned) = plan(&s, &schemas, "managed_line", line.clone(), &[id]);
    let diff = planned[0]["diff"].as_str().unwrap();
    assert!(diff.contains("--- /etc/probe.d/app.conf") && diff.contains(" a = 1\n+b = 2\n"), "{diff}");
    assert_eq!(std::fs::read_to_string(e.file("/etc/probe.d/app.conf")).unwrap(), "a = 1\n");
    let (status, rows) = run_instruction(&s, &schemas, "managed_line", line.clone(), &[id]);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");
    assert_eq!(rows[0]["values"]["change"], "add", "{rows:?}");
    assert_eq!(std::fs::read_to_string(e.file("/etc/probe.d/app.conf")).unwrap(), "a = 1\nb = 2\n");
    assert_eq!(e.run(&["stat", "-c", "%a %U", "/etc/probe.d/app.conf"]).trim(), "640 root", "mode and owner kept");

    let restore = json!({"path": "/etc/probe.d/app.conf"});
    let (_, planned) = plan(&s, &schemas, "restore_backup", restore.clone(), &[id]);
    assert!(planned[0]["diff"].as_str().unwrap().contains("-b = 2"), "{planned:?}");
    let (status, _) = run_instruction(&s, &schemas, "restore_backup", restore, &[id]);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");
    assert_eq!(std::fs::read_to_string(e.file("/etc/probe.d/app.conf")).unwrap(), "a = 1\n", "restored");
}

/// Disk space freed: the plan lists apt's downloaded packages and the journal's archived
/// files (oldest first, until the journal fits), each with its size; applying deletes exactly
/// those, and the active journal stays.
#[test]
fn disk_space_is_freed_as_planned() {
    let s = start(FAST);
    let schemas = output_schemas(&s);
    let (bed, ids) = Bed::enrolled(&s, &["disk-a"]);
    let (e, id) = (&bed.endpoints[0], ids["disk-a"].as_str());
    let deb = "/var/cache/apt/archives/probe_1.0_all.deb";
    e.run(&["sh", "-c", &format!("head -c 1048576 /dev/zero >{deb} && journalctl --rotate && journalctl --flush")]);
    let params = json!({"journal_max_bytes": 1048576});
    let (status, planned) = plan(&s, &schemas, "free_disk_space", params.clone(), &[id]);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");
    assert!(planned.iter().any(|r| r["path"] == deb && r["bytes"] == 1048576), "{planned:?}");
    let journals: Vec<&str> =
        planned.iter().filter(|r| r["kind"] == "archived journal").map(|r| r["path"].as_str().unwrap()).collect();
    assert!(!journals.is_empty() && journals.iter().all(|p| p.contains('@')), "{planned:?}");
    assert!(e.exec(&["test", "-e", deb]).status.success(), "a plan deletes nothing");
    let (status, rows) = run_instruction(&s, &schemas, "free_disk_space", params, &[id]);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");
    assert_eq!(rows.len(), planned.len(), "{rows:?}");
    for path in journals.iter().chain([&deb]) {
        assert!(!e.exec(&["test", "-e", path]).status.success(), "{path} is gone");
    }
    assert!(e.run(&["journalctl", "--disk-usage"]).contains("take up"), "the active journal stays readable");
}

//! docs/instructions.md's runbook, "Restart a failed service across a group, with approval",
//! run step by step as written: the same calls, on booted Debian hosts with the agent
//! installed from its package. A change to the runbook's calls must change this test too.

use serde_json::{Value, json};

use crate::common;
use common::agents::{FAST, approval_id, output_schemas, structured, structured_as, wait_finished};
use common::start;
use common::testbed::Bed;

#[test]
fn restart_a_failed_service_across_a_group_with_approval() {
    let s = start(FAST);
    let schemas = output_schemas(&s);
    let (bed, ids) = Bed::enrolled(&s, &["web-1", "web-2", "db-1"]);
    // The service fails on the two web hosts for want of its configuration.
    let unit = "[Unit]\nDescription=The web probe\n[Service]\nExecStart=/bin/sh -c 'test -f /etc/web-probe.conf && exec sleep infinity'\n";
    for e in bed.endpoints.iter().filter(|e| e.name.starts_with("web")) {
        std::fs::write(e.file("/etc/systemd/system/web-probe.service"), unit).unwrap();
        e.run(&["systemctl", "daemon-reload"]);
        let _ = e.exec(&["systemctl", "start", "web-probe.service"]);
    }
    for (host, id) in &ids {
        let role = if host.starts_with("web") { "web" } else { "db" };
        structured(&s, &schemas, "set_tag", json!({"agent_id": id, "key": "role", "value": role}));
    }
    let run = |token: &str, arguments: Value| {
        let started = structured_as(&s, &schemas, token, "execute_instruction", arguments);
        let execution = started["execution_id"].as_str().unwrap().to_string();
        let status = wait_finished(&s, &schemas, token, &execution);
        let rows =
            structured_as(&s, &schemas, token, "query_responses", json!({"execution_id": execution, "limit": 1000}));
        (status, rows["rows"].as_array().unwrap().clone())
    };

    // 1. What failed in the group, and why.
    let group = "tag:role = web";
    let (_, failed) = run(&s.token, json!({"definition": "failed_units", "scope": group}));
    let failing: Vec<&Value> = failed.iter().filter(|r| r["values"]["unit"] == "web-probe.service").collect();
    assert_eq!(failing.len(), 2, "{failed:?}");
    let (_, journal) = run(
        &s.token,
        json!({"definition": "journal_tail", "params": {"unit": "web-probe", "priority": "info"}, "scope": group}),
    );
    assert!(
        journal.iter().any(|r| r["values"]["message"].as_str().unwrap_or_default().contains("web-probe")),
        "{journal:?}"
    );

    // 2. The cause is fixed (by hand here; managed_line can write a configuration line).
    for e in bed.endpoints.iter().filter(|e| e.name.starts_with("web")) {
        std::fs::write(e.file("/etc/web-probe.conf"), "ready\n").unwrap();
    }

    // 3. The restart, asked for in the supervised tier: held for a person, planned on the group.
    let supervised = s.token("admin", "supervised", "1h");
    let restart =
        json!({"definition": "service_action", "params": {"unit": "web-probe", "action": "restart"}, "scope": group});
    let ticket = approval_id(&common::call_as(&s, &supervised, "execute_instruction", restart.clone()));

    // 4. A person reads the plan on /console/approvals and approves it.
    let reviewer = common::console::reviewer(&s, "rita");
    let (page, digest) = common::console::page_with_plans(&s, &reviewer, "2 hosts with this plan");
    assert!(page.contains("<td>web-probe.service</td><td>restart</td><td>failed</td><td>active</td>"), "{page}");
    let decided =
        common::console::decide(&s, &reviewer, &ticket, "approve", json!({"comment": "config fixed", "plans": digest}));
    assert_eq!(decided.status, 200, "{decided:?}");

    // 5. The recall applies the approved plan on each host.
    let mut recall = restart;
    recall["approval_id"] = json!(ticket);
    let (status, _) = run(&supervised, recall);
    assert_eq!(status["counts"], json!({"succeeded": 2}), "{status}");

    // 6. Nothing is failed any more; the db host was never touched.
    let (_, failed) = run(&s.token, json!({"definition": "failed_units", "scope": group}));
    assert!(!failed.iter().any(|r| r["values"]["unit"] == "web-probe.service"), "{failed:?}");
    for e in &bed.endpoints {
        let state = e.run(&["systemctl", "show", "--value", "--property", "ActiveState", "web-probe"]);
        let expected = if e.name.starts_with("web") { "active" } else { "inactive" };
        assert_eq!(state.trim(), expected, "{}", e.name);
    }
}

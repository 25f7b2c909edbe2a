//! Packages changed with apt on a booted Debian endpoint (issue 46), against a local apt
//! repository the test publishes newer versions to: installed as planned; upgraded from 1.0 to
//! 1.1 after a person approved that plan on the console; a newer version published between
//! the approval and the recall changes nothing ("plan changed"); pending updates applied;
//! removed. Every version is read back with dpkg-query on the host.

use serde_json::json;

use crate::common;
use common::agents::{FAST, approval_id, output_schemas, run_execution, run_instruction, structured_as, wait_finished};
use common::apt::{Repository, probe_package};
use common::start;
use common::testbed::{Bed, Endpoint};

/// The probe's version as dpkg says it; empty when it is not installed.
fn installed(e: &Endpoint) -> String {
    let out = e.exec(&["dpkg-query", "--show", "--showformat=${db:Status-Abbrev}${Version}", "toolgate-probe"]);
    String::from_utf8_lossy(&out.stdout).strip_prefix("ii ").unwrap_or_default().to_string()
}

#[test]
fn packages_are_installed_upgraded_as_approved_and_removed() {
    let s = start(FAST);
    let schemas = output_schemas(&s);
    let (bed, ids) = Bed::enrolled(&s, &["pkg-a"]);
    let (e, id) = (&bed.endpoints[0], ids["pkg-a"].as_str());
    let dir = tempfile::tempdir().unwrap();
    let version = |v: &str| probe_package(dir.path(), v);
    let (v10, v11, v12, v13) = (version("1.0"), version("1.1"), version("1.2"), version("1.3"));
    let repository = Repository::serve(dir.path(), &[&v10]);
    repository.use_on(e);
    let probe = json!({"name": "toolgate-probe"});

    // Planned: apt's simulation says what it would install; nothing is installed by the plan.
    let arguments = json!({"definition": "install_package", "params": probe, "agent_ids": [id], "plan_only": true});
    let (status, rows) = run_execution(&s, &schemas, arguments);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");
    let plan = &rows[0]["values"];
    assert_eq!(
        (&plan["package"], &plan["action"], &plan["version_now"], &plan["version_after"]),
        (&json!("toolgate-probe"), &json!("install"), &json!(""), &json!("1.0")),
        "{plan}"
    );
    assert_eq!(installed(e), "", "a plan installs nothing");
    let (status, _) = run_instruction(&s, &schemas, "install_package", probe.clone(), &[id]);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");
    assert_eq!(installed(e), "1.0");

    // 1.1 is published; held for a person, the page shows 1.0 -> 1.1, the approval binds it,
    // the recall upgrades.
    repository.publish(&[&v10, &v11]);
    repository.update_on(e);
    let supervised = s.token("admin", "supervised", "1h");
    let reviewer = common::console::reviewer(&s, "rita");
    let upgrade = json!({"definition": "upgrade_package", "params": probe, "agent_ids": [id]});
    let recalled = |ticket: &str| {
        let mut recall = upgrade.clone();
        recall["approval_id"] = json!(ticket);
        let started = structured_as(&s, &schemas, &supervised, "execute_instruction", recall);
        wait_finished(&s, &schemas, &supervised, started["execution_id"].as_str().unwrap())
    };
    let ticket = approval_id(&common::call_as(&s, &supervised, "execute_instruction", upgrade.clone()));
    let (page, digest) = common::console::page_with_plans(&s, &reviewer, "1 host with this plan");
    assert!(page.contains("<td>1.0</td><td>1.1</td>"), "from 1.0 to 1.1: {page}");
    let approved =
        common::console::decide(&s, &reviewer, &ticket, "approve", json!({"comment": "ok", "plans": digest}));
    assert_eq!(approved.status, 200, "{approved:?}");
    assert_eq!(installed(e), "1.0", "approving changes nothing");
    assert_eq!(recalled(&ticket)["counts"], json!({"succeeded": 1}));
    assert_eq!(installed(e), "1.1");

    // 1.2 is approved, but 1.3 is published before the recall: the plan changed, nothing is.
    repository.publish(&[&v11, &v12]);
    repository.update_on(e);
    let ticket = approval_id(&common::call_as(&s, &supervised, "execute_instruction", upgrade.clone()));
    common::console::page_with_plans(&s, &reviewer, "<td>1.1</td><td>1.2</td>");
    assert_eq!(common::console::approve(&s, &reviewer, &ticket).status, 200);
    repository.publish(&[&v12, &v13]);
    repository.update_on(e);
    let status = recalled(&ticket);
    assert_eq!(status["counts"], json!({"plan_changed": 1}), "{status}");
    assert_eq!(installed(e), "1.1", "nothing changed");

    // The pending updates applied (operator tier: no approval), then the package removed.
    let (status, rows) = run_instruction(&s, &schemas, "apply_updates", json!({}), &[id]);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");
    assert_eq!(
        (&rows[0]["values"]["version_before"], &rows[0]["values"]["version_after"]),
        (&json!("1.1"), &json!("1.3"))
    );
    assert_eq!(installed(e), "1.3");
    let (status, _) = run_instruction(&s, &schemas, "remove_package", probe.clone(), &[id]);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");
    assert_eq!(installed(e), "", "removed");
    let (status, _) = run_instruction(&s, &schemas, "upgrade_package", probe, &[id]);
    let error = status["agents"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("is not installed: install_package installs it"), "{status}");
}

//! Programs on a booted Debian endpoint (docs/experience.md, "Programs"): a daemon installed
//! from the local apt repository runs as its package's version; upgraded with upgrade_package,
//! its package restarts it at the new version, which runs twice the workers; the app tools
//! tell the two versions apart and compare_app_perf_versions finds the new one costlier by a
//! rank test, naming the device that moved and when. dpkg on the host says the same version.

use serde_json::{Value, json};

use super::testbed_experience::until;
use crate::common;
use common::agents::{output_schemas, run_instruction, structured};
use common::apt::{Repository, program_package};
use common::start;
use common::testbed::Bed;

/// The CPU seconds get_dex_app_perf counts for `version` of the probe.
fn cpu_at(perf: &Value, version: &str) -> f64 {
    let versions = perf["versions"].as_array().cloned().unwrap_or_default();
    versions.iter().find(|v| v["version"] == version).and_then(|v| v["cpu_seconds"].as_f64()).unwrap_or(0.0)
}

#[test]
fn an_upgrade_through_upgrade_package_shows_in_compare_app_perf_versions() {
    let s = start(&[super::experience::EVERY_SECOND, &["--agent-missed-heartbeats", "10"]].concat());
    let schemas = output_schemas(&s);
    let (bed, ids) = Bed::enrolled(&s, &["app-a"]);
    let (e, id) = (&bed.endpoints[0], ids["app-a"].as_str());
    let dir = tempfile::tempdir().unwrap();
    let (v10, v11) = (program_package(dir.path(), "1.0", 1), program_package(dir.path(), "1.1", 2));
    let repository = Repository::serve(dir.path(), &[&v10]);
    repository.use_on(e);
    let probe = json!({"name": "toolgate-probe"});
    let cpus_to_myself = common::machine_cpus_to_myself();
    let (status, _) = run_instruction(&s, &schemas, "install_package", probe.clone(), &[id]);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");

    let perf =
        |window: &str| structured(&s, &schemas, "get_dex_app_perf", json!({"app": "toolgate-probe", "window": window}));
    until("the probe named", || {
        let args = json!({"app": "toolgate-probe", "window": "1h"});
        let found = common::call_as(&s, &s.token, "get_dex_app_perf", args).json();
        (found["result"]["isError"] != true).then_some(()).ok_or_else(|| found.to_string())
    });
    until("ten CPU seconds of 1.0", || {
        let found = perf("1h");
        (cpu_at(&found, "1.0") >= 10.0).then_some(()).ok_or_else(|| found.to_string())
    });
    let usage = structured(&s, &schemas, "get_agent_app_usage", json!({"agent_id": id, "window": "1h"}));
    let top = &usage["apps"][0];
    assert_eq!(top["app"], "toolgate-probe", "the busy daemon costs most on its host: {usage}");
    assert_eq!(top["packages"], json!([{"package": "toolgate-probe", "version": "1.0"}]), "{usage}");
    assert_eq!(usage["exits_unseen"], Value::Null, "process accounting counts exits in the container: {usage}");

    repository.publish(&[&v10, &v11]);
    repository.update_on(e);
    let (status, _) = run_instruction(&s, &schemas, "upgrade_package", probe.clone(), &[id]);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");
    let installed = e.run(&["dpkg-query", "--show", "--showformat=${Version}", "toolgate-probe"]);
    assert_eq!(installed.trim(), "1.1", "dpkg on the host");
    until("twenty CPU seconds of 1.1", || {
        let found = perf("1h");
        (cpu_at(&found, "1.1") >= 20.0).then_some(()).ok_or_else(|| found.to_string())
    });
    let compare = |baseline: &str, candidate: &str| {
        let args =
            json!({"app": "toolgate-probe", "group": "all", "baseline": baseline, "candidate": candidate, "window": 1});
        common::call_as(&s, &s.token, "compare_app_perf_versions", args)
    };
    let compared = structured(
        &s,
        &schemas,
        "compare_app_perf_versions",
        json!({"app": "toolgate-probe", "group": "all", "baseline": "1.0", "candidate": "1.1", "window": 1}),
    );
    e.run(&["systemctl", "stop", "toolgate-probe.service"]);
    drop(cpus_to_myself);

    assert_eq!(compared["observations_are"], "samples", "{compared}");
    let cpu = &compared["tests"]["cpu_seconds_per_sample"];
    assert_eq!(cpu["verdict"], "candidate is higher", "two workers against one: {compared}");
    assert!(cpu["test"]["p_value"].as_f64() < Some(0.05), "{compared}");
    let median = |side: &str| compared[side]["cpu_seconds_per_sample_median"].as_f64().unwrap();
    // Twice the workers, on a machine other tests share: more, by how much depends on them.
    assert!(median("candidate") > median("baseline"), "{compared}");
    for side in ["baseline", "candidate"] {
        assert_eq!(compared[side]["devices"], 1, "{compared}");
        assert!(compared[side]["observations"].as_u64() >= Some(5), "{compared}");
    }
    let moved = compared["upgraded"].as_array().unwrap();
    assert_eq!(moved.len(), 1, "{compared}");
    assert_eq!(moved[0]["hostname"], "app-a", "{compared}");
    assert!(moved[0]["candidate_first_seen_ms"].as_i64() >= moved[0]["baseline_last_seen_ms"].as_i64(), "{compared}");

    // The versions apart, and in the group; a version it never ran is named with the closest.
    let both = perf("1h");
    let versions: Vec<&str> =
        both["versions"].as_array().unwrap().iter().filter_map(|v| v["version"].as_str()).collect();
    assert!(versions.contains(&"1.0") && versions.contains(&"1.1"), "{both}");
    let group = structured(
        &s,
        &schemas,
        "get_dex_group_app_perf",
        json!({"group_id": "all", "app": "toolgate-probe", "version": "1.1", "window": "1h"}),
    );
    assert_eq!(group["devices"][0]["hostname"], "app-a", "{group}");
    assert_eq!(group["versions"].as_array().unwrap().len(), 1, "one version kept: {group}");
    let unknown = compare("1.0", "1.2").json().to_string();
    assert!(unknown.contains("candidate `1.2`") && unknown.contains("`1.1`"), "{unknown}");
    let same = compare("1.0", "1.0").json().to_string();
    assert!(same.contains("name two versions"), "{same}");
}

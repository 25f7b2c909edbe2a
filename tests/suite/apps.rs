//! The app tools (docs/experience.md, "Programs") over a real agent's samples of this machine:
//! `yes`, busy, is named with its CPU time, memory and the package that owns it (coreutils, at
//! the version dpkg says); asked by package, the tools find the program; every bad argument
//! gets an answer that names what would do. The test bed shows the top app on a loaded
//! endpoint and an upgrade (testbed_experience, testbed_apps).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;
use common::agents::*;
use common::start;

/// Ends the busy program when the test does, however it ends.
struct Busy(std::process::Child);

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn error_text(s: &common::Server, tool: &str, arguments: Value) -> String {
    common::call_as(s, &s.token, tool, arguments).json().to_string()
}

#[test]
fn a_busy_program_is_named_with_its_cost_and_its_package() {
    let s = start(super::experience::EVERY_SECOND);
    let schemas = output_schemas(&s);
    let token = mint(&s, &[]);
    let states = tempfile::tempdir().unwrap();
    let agent = spawn_agent(&s, Some(&token), &states.path().join("apps-a"), Some("apps-a"));
    let cpus_to_myself = common::machine_cpus_to_myself();
    let busy = Busy(Command::new("/usr/bin/yes").stdout(Stdio::null()).spawn().unwrap());
    let started = Instant::now();
    let id = loop {
        let usage = structured(&s, &schemas, "list_dex_perf_apps", json!({"window": "1h", "limit": 500}));
        let yes = usage["apps"].as_array().unwrap().iter().find(|a| a["app"] == "yes").cloned();
        if yes.as_ref().is_some_and(|y| {
            y["cpu_seconds"].as_f64() > Some(3.0) && y["packages"].as_array().is_some_and(|p| !p.is_empty())
        }) {
            break list_agent_id(&s, &schemas, "apps-a");
        }
        assert!(started.elapsed() < PATIENCE, "yes never named: {usage}\n{}", agent.log_text());
        std::thread::sleep(Duration::from_millis(300));
    };
    let usage = structured(&s, &schemas, "get_agent_app_usage", json!({"agent_id": id, "window": "1h", "limit": 500}));
    drop(busy);
    drop(cpus_to_myself);
    let coreutils =
        Command::new("dpkg-query").args(["--show", "--showformat=${Version}", "coreutils"]).output().unwrap();
    let version = String::from_utf8(coreutils.stdout).unwrap();
    let yes = usage["apps"].as_array().unwrap().iter().find(|a| a["app"] == "yes").expect("yes is listed").clone();
    assert_eq!(yes["packages"], json!([{"package": "coreutils", "version": version}]), "{usage}");
    assert!(yes["cpu_seconds_per_sample"].as_f64() > Some(0.3), "a busy CPU a second: {usage}");
    assert!(yes["rss_bytes_avg"].as_f64() > Some(0.0), "{usage}");
    assert!(usage["note"].as_str().unwrap().contains("8 programs"), "{usage}");

    // Asked by its package, the program is found; one version kept.
    let perf =
        structured(&s, &schemas, "get_dex_app_perf", json!({"app": "coreutils", "version": version, "window": "1h"}));
    assert!(perf["programs"].as_array().unwrap().contains(&json!("yes")), "{perf}");
    assert_eq!(perf["devices"][0]["hostname"], "apps-a", "{perf}");
    assert_eq!(perf["versions"][0]["package"], "coreutils", "{perf}");
    let in_root =
        structured(&s, &schemas, "get_dex_group_app_perf", json!({"group_id": "all", "app": "yes", "window": "1h"}));
    assert_eq!(in_root["group"]["id"], "all", "{in_root}");
    assert_eq!(in_root["device_count"], 1, "{in_root}");

    // Bad arguments name what would do.
    assert!(error_text(&s, "get_dex_app_perf", json!({"app": "yse", "window": "1h"})).contains("`yes`"));
    assert!(
        error_text(&s, "get_dex_app_perf", json!({"app": "yes", "version": "0.0", "window": "1h"})).contains(&version)
    );
    assert!(
        error_text(&s, "get_dex_group_app_perf", json!({"group_id": "nope", "app": "yes"}))
            .contains("list_management_groups")
    );
    assert!(error_text(&s, "get_agent_app_usage", json!({"agent_id": "nope"})).contains("list_agents"));
    let same = json!({"app": "yes", "group": "all", "baseline": "1", "candidate": "1"});
    assert!(error_text(&s, "compare_app_perf_versions", same).contains("name two versions"));
}

/// The id of the agent named `hostname`, from list_agents.
fn list_agent_id(s: &common::Server, schemas: &std::collections::HashMap<String, Value>, hostname: &str) -> String {
    let agents = structured(s, schemas, "list_agents", json!({}));
    let found = agents["agents"].as_array().unwrap().iter().find(|a| a["hostname"] == hostname).cloned();
    found.and_then(|a| a["agent_id"].as_str().map(str::to_string)).unwrap_or_else(|| panic!("no {hostname}: {agents}"))
}

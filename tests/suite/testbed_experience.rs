//! Endpoint experience on booted Debian hosts (the test bed, docs/testbed.md): agents installed
//! from their package measure their own container (its cgroup, not the machine's), so a busy
//! endpoint ranks first and raises the CPU signal alone, a program killed by a signal is a
//! crash named on its host, a unit that fails and a filesystem that fills up are signals on
//! their host, and systemd's own timing gives each boot's duration.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;
use common::agents::{PATIENCE, output_schemas, structured};
use common::start;
use common::testbed::{Bed, Endpoint};

fn endpoint<'a>(bed: &'a Bed, name: &str) -> &'a Endpoint {
    bed.endpoints.iter().find(|e| e.name == name).unwrap()
}

/// Polls `probe` until it gives a value, for at most [`PATIENCE`].
pub(super) fn until<T>(what: &str, mut probe: impl FnMut() -> Result<T, String>) -> T {
    let started = Instant::now();
    loop {
        match probe() {
            Ok(found) => return found,
            Err(last) if started.elapsed() > PATIENCE => panic!("{what}: not within {PATIENCE:?}; last: {last}"),
            Err(_) => std::thread::sleep(Duration::from_millis(300)),
        }
    }
}

fn occurrence_hosts(detail: &Value) -> Vec<String> {
    detail["occurrences"].as_array().unwrap().iter().map(|o| o["hostname"].as_str().unwrap().to_string()).collect()
}

#[test]
fn a_busy_endpoint_ranks_first_and_a_failed_unit_is_a_signal_on_its_host() {
    let s = start(&[super::experience::EVERY_SECOND, &["--agent-missed-heartbeats", "10"]].concat());
    let schemas = output_schemas(&s);
    let (bed, _ids) = Bed::enrolled(&s, &["exp-a", "exp-b"]);
    let (a, b) = (endpoint(&bed, "exp-a"), endpoint(&bed, "exp-b"));
    // What the image itself may have failed at boot (docs/testbed.md) is not what this checks.
    for e in [a, b] {
        e.run(&["systemctl", "reset-failed"]);
    }

    // Both measure their container, with the boot's duration by systemd's timing.
    until("both endpoints measured as containers, with their boot time", || {
        let fleet = structured(&s, &schemas, "get_dex_perf_fleet", json!({"window": "1h"}));
        let boot = fleet["metrics"].as_array().unwrap().iter().find(|m| m["metric"] == "boot_duration_ms").cloned();
        let booted = boot.as_ref().is_some_and(|m| m["devices"] == 2 && m["p50"].as_f64().is_some_and(|v| v > 0.0));
        (fleet["devices"]["measured_cgroup"] == 2 && booted).then_some(()).ok_or_else(|| fleet.to_string())
    });

    // One busy loop per CPU the endpoint may use, as units of its own systemd (in its cgroup),
    // while no other test burns the machine's CPUs.
    let cpus_to_myself = common::machine_cpus_to_myself();
    let cpus: usize = a.run(&["nproc"]).trim().parse().unwrap();
    let burners: Vec<String> = (0..cpus).map(|i| format!("burner-{i}")).collect();
    for unit in &burners {
        a.run(&["systemd-run", &format!("--unit={unit}"), "sh", "-c", "while :; do :; done"]);
    }
    let fired = until("the CPU signal on the busy endpoint", || {
        let detail = structured(&s, &schemas, "get_dex_signal_detail", json!({"obs_type": "cpu_sustained_high"}));
        let ranked = structured(&s, &schemas, "list_dex_perf_devices", json!({"metric": "cpu", "window_minutes": 1}));
        (!occurrence_hosts(&detail).is_empty())
            .then_some(detail.clone())
            .ok_or_else(|| format!("{detail}\nranked: {ranked}"))
    });
    assert_eq!(occurrence_hosts(&fired), ["exp-a"], "only the busy endpoint: {fired}");
    let ranked = structured(&s, &schemas, "list_dex_perf_devices", json!({"metric": "cpu", "window_minutes": 1}));
    assert_eq!(ranked["devices"][0]["hostname"], "exp-a", "{ranked}");
    assert_eq!(ranked["devices"][1]["hostname"], "exp-b", "{ranked}");
    assert!(ranked["devices"][0]["average"].as_f64() > ranked["devices"][1]["average"].as_f64(), "{ranked}");
    let mut stop = vec!["systemctl", "stop"];
    stop.extend(burners.iter().map(String::as_str));
    a.run(&stop);
    drop(cpus_to_myself);

    // A program killed by SIGSEGV is a crash of that program, on that host: the container's
    // process accounting saw it end.
    a.run(&[
        "sh",
        "-c",
        "cp /bin/sleep /usr/local/bin/flaky-app; /usr/local/bin/flaky-app 300 & sleep 0.5; kill -SEGV $!; wait $!; true",
    ]);
    let crashed = until("the crash signal naming the program", || {
        let detail = structured(&s, &schemas, "get_dex_signal_detail", json!({"obs_type": "app_crash"}));
        let on_a = detail["occurrences"].as_array().unwrap().iter().find(|o| o["hostname"] == "exp-a").cloned();
        let named = on_a.is_some_and(|o| {
            o["programs"].as_array().is_some_and(|p| p.contains(&json!({"name": "flaky-app", "count": 1})))
        });
        named.then_some(detail.clone()).ok_or_else(|| detail.to_string())
    });
    assert_eq!(crashed["severity"], "warning", "{crashed}");

    // A unit that fails stays failed: the signal is on its host only.
    let _ = b.exec(&["systemd-run", "--unit=doomed", "--wait", "false"]);
    let failed = until("the failed-unit signal", || {
        let detail = structured(&s, &schemas, "get_dex_signal_detail", json!({"obs_type": "failed_unit"}));
        occurrence_hosts(&detail)
            .contains(&"exp-b".to_string())
            .then_some(detail.clone())
            .ok_or_else(|| detail.to_string())
    });
    assert!(!occurrence_hosts(&failed).contains(&"exp-a".to_string()), "{failed}");

    // A small filesystem filled up on one endpoint: disk nearly full there, naming it.
    b.run(&["mkdir", "-p", "/mnt/small"]);
    b.run(&["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", "/mnt/small"]);
    b.run(&["sh", "-c", "head -c 3900000 /dev/zero > /mnt/small/fill"]);
    // (The endpoints' `/` is the build machine's disk, which may itself be nearly full: wait
    // for the sample that names the small one.)
    let scope = until("disk nearly full, naming the small filesystem", || {
        let scope = structured(&s, &schemas, "get_dex_signal_scope", json!({}));
        let named = scope["devices"].as_array().unwrap().iter().any(|d| {
            d["hostname"] == "exp-b"
                && d["fullest_filesystem"] == "/mnt/small"
                && d["active"].as_array().unwrap().contains(&json!("disk_nearly_full"))
        });
        named.then_some(scope.clone()).ok_or_else(|| scope.to_string())
    });
    let full = structured(&s, &schemas, "get_dex_signal_detail", json!({"obs_type": "disk_nearly_full"}));
    let on_b = full["occurrences"].as_array().unwrap().iter().find(|o| o["hostname"] == "exp-b").unwrap();
    assert!(on_b["peak"].as_f64() < Some(10.0), "{full}");
    let b_signals = scope["devices"].as_array().unwrap().iter().find(|d| d["hostname"] == "exp-b").unwrap();
    for signal in ["failed_unit", "disk_nearly_full"] {
        assert!(b_signals["active"].as_array().unwrap().contains(&json!(signal)), "{signal}: {scope}");
    }
}

/// Three booted endpoints tagged by role, one of them running a CPU burner: the cohort diff by
/// tag finds the loaded cohort higher with p < 0.05 and a large effect, and finds no difference
/// between the two idle ones (docs/experience.md, "Cohorts").
#[test]
fn a_loaded_cohort_differs_from_an_idle_one_and_two_idle_ones_do_not() {
    let s = start(&[super::experience::EVERY_SECOND, &["--agent-missed-heartbeats", "10"]].concat());
    let schemas = output_schemas(&s);
    let (bed, ids) = Bed::enrolled(&s, &["coh-a", "coh-b", "coh-c"]);
    for (name, role) in [("coh-a", "loaded"), ("coh-b", "idle-1"), ("coh-c", "idle-2")] {
        let args = json!({"agent_id": ids[name], "key": "role", "value": role});
        structured(&s, &schemas, "set_tag", args);
    }
    let cohorts = structured(&s, &schemas, "get_dex_perf_cohorts", json!({"key": "tag:role", "window": "1h"}));
    let values: Vec<&str> =
        cohorts["cohorts"].as_array().unwrap().iter().map(|c| c["value"].as_str().unwrap()).collect();
    assert_eq!(values, ["idle-1", "idle-2", "loaded"], "{cohorts}");

    let cpus_to_myself = common::machine_cpus_to_myself();
    let a = endpoint(&bed, "coh-a");
    let cpus: usize = a.run(&["nproc"]).trim().parse().unwrap();
    let burners: Vec<String> = (0..cpus).map(|i| format!("burner-{i}")).collect();
    // The burner has a name of its own: `yes` copied as tg-burner, writing to nothing.
    a.run(&["cp", "/usr/bin/yes", "/usr/local/bin/tg-burner"]);
    for unit in &burners {
        a.run(&["systemd-run", &format!("--unit={unit}"), "sh", "-c", "exec /usr/local/bin/tg-burner > /dev/null"]);
    }
    let diff = |x: &str, y: &str| {
        let args = json!({"key": "tag:role", "a": x, "b": y, "metric": "cpu", "window": "1h"});
        structured(&s, &schemas, "get_dex_perf_cohort_diff", args)
    };
    // The loaded cohort's samples since it booted include its idle ones: wait until the busy
    // ones make the difference plain.
    let loaded = until("the loaded cohort found higher", || {
        let found = diff("loaded", "idle-1");
        (found["verdict"] == "loaded is higher").then_some(found.clone()).ok_or_else(|| found.to_string())
    });
    // The burner is the top app by CPU on its device, and fleet-wide; no package owns it.
    let usage = until("the burner first on its device", || {
        let found = structured(&s, &schemas, "get_agent_app_usage", json!({"agent_id": ids["coh-a"], "window": "1h"}));
        (found["apps"][0]["app"] == "tg-burner").then_some(found.clone()).ok_or_else(|| found.to_string())
    });
    let fleet = structured(&s, &schemas, "list_dex_perf_apps", json!({"window": "1h", "limit": 3}));
    let mut stop = vec!["systemctl", "stop"];
    stop.extend(burners.iter().map(String::as_str));
    a.run(&stop);
    drop(cpus_to_myself);
    let burner = &usage["apps"][0];
    assert!(burner["cpu_seconds"].as_f64() > Some(1.0), "{usage}");
    assert_eq!(burner["packages"], json!([{"package": null, "version": null}]), "{usage}");
    assert_eq!(fleet["apps"][0]["app"], "tg-burner", "{fleet}");
    assert_eq!(fleet["apps"][0]["devices"], 1, "{fleet}");
    assert!(loaded["test"]["p_value"].as_f64() < Some(0.05), "{loaded}");
    assert!(loaded["test"]["effect_size"].as_f64() >= Some(0.3), "{loaded}");
    assert!(loaded["a"]["median"].as_f64() > loaded["b"]["median"].as_f64(), "{loaded}");
    assert_eq!(loaded["observations_are"], "samples", "{loaded}");

    // Two idle cohorts, once each has twenty samples: no difference.
    let idle = until("twenty samples of each idle cohort", || {
        let found = diff("idle-1", "idle-2");
        let enough = ["a", "b"].iter().all(|c| found[c]["observations"].as_u64() >= Some(20));
        enough.then_some(found.clone()).ok_or_else(|| found.to_string())
    });
    assert_eq!((&idle["verdict"], &idle["differs"]), (&json!("no clear difference"), &json!(false)), "{idle}");

    let unknown = common::call_as(
        &s,
        &s.token,
        "get_dex_perf_cohort_diff",
        json!({"key": "tag:role", "a": "lodaed", "b": "idle-1"}),
    );
    assert!(unknown.json().to_string().contains("`loaded`"), "the closest cohort: {}", unknown.json());
}

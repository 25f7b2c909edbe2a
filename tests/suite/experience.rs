//! Experience telemetry end to end (docs/experience.md): a real agent (this very binary,
//! `agent run`) samples this machine on the interval the server's welcome sets and reports
//! in batches; the server keeps every metric, or why the device cannot give it.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::agents::*;
use common::start;
use toolgate_domain::fleet::experience::METRICS;
use toolgate_domain::groups::Reach;
use toolgate_store::{DeviceExperience, SQLITE_FILE_NAME, SqliteStore};

const SAMPLED: &[&str] =
    &["--experience-sample-interval", "1s", "--experience-report-interval", "2s", "--agent-heartbeat-ms", "200"];
/// A sample and a report every second: the tests that wait on what agents measured.
pub(crate) const EVERY_SECOND: &[&str] =
    &["--experience-sample-interval", "1s", "--experience-report-interval", "1s", "--agent-heartbeat-ms", "200"];

/// The newest experience of every device, read from the server's own store, with the metrics
/// each has a sample of.
fn devices(data_dir: &std::path::Path) -> Vec<(DeviceExperience, BTreeSet<&'static str>)> {
    let store = SqliteStore::open(&data_dir.join(SQLITE_FILE_NAME)).unwrap().repositories();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let mut devices = Vec::new();
        for device in store.experience.device_experience(&Reach::Fleet, None).await.unwrap() {
            let wanted: Vec<(&str, usize)> = METRICS.iter().map(|m| (m.name, 1)).collect();
            let newest = store.experience.recent_values(&device.agent_id, &wanted).await.unwrap();
            let sampled = METRICS.iter().zip(newest).filter(|(_, v)| !v.is_empty()).map(|(m, _)| m.name).collect();
            devices.push((device, sampled));
        }
        devices
    })
}

#[test]
fn an_agent_samples_its_host_and_the_server_keeps_every_metric_or_why_not() {
    let s = start(SAMPLED);
    let token = mint(&s, &[]);
    let states = tempfile::tempdir().unwrap();
    let agent = spawn_agent(&s, Some(&token), &states.path().join("exp-a"), Some("exp-a"));
    let started = Instant::now();
    // Two reports: the second has a round trip (the first pongs come within the first second).
    let (device, sampled) = loop {
        let found = devices(s.data_dir.path());
        if let Some(d) = found.first().filter(|(_, sampled)| sampled.contains("heartbeat_rtt_ms") && sampled.len() > 5)
        {
            break d.clone();
        }
        assert!(started.elapsed() < PATIENCE, "no experience after {PATIENCE:?}: {found:?}\n{}", agent.log_text());
        std::thread::sleep(Duration::from_millis(200));
    };
    for metric in METRICS {
        let measured = sampled.contains(metric.name);
        assert!(measured != device.absent.contains_key(metric.name), "{}: {device:?}", metric.name);
    }
    for name in ["cpu_busy_pct", "mem_used_pct", "disk_free_pct", "net_rx_bytes_per_s", "tcp_retransmits_per_s"] {
        assert!(sampled.contains(name), "{name}: {sampled:?}");
    }
    // In a container (this build machine may be one) the kernel-wide metrics are named absent.
    match device.measured.as_str() {
        "cgroup" => assert!(device.absent["load_1"].contains("whole machine"), "{device:?}"),
        measured => assert_eq!(measured, "host", "{device:?}"),
    }
    assert!(device.fullest_filesystem.is_some(), "{device:?}");
    // What the server took is no longer kept on the agent.
    let kept = std::fs::read_to_string(states.path().join("exp-a").join("experience.jsonl")).unwrap_or_default();
    assert!(kept.lines().count() < 5, "the agent still keeps {} samples", kept.lines().count());
}

/// The fleet's percentiles and the ranking come from what the agent sent; a device that stops
/// reporting is listed as such once its samples are late.
#[test]
fn the_fleet_and_its_devices_are_told_from_their_samples() {
    let s = start(EVERY_SECOND);
    let schemas = output_schemas(&s);
    let token = mint(&s, &[]);
    let states = tempfile::tempdir().unwrap();
    let mut agent = spawn_agent(&s, Some(&token), &states.path().join("perf-a"), Some("perf-a"));
    let started = Instant::now();
    let ranked = loop {
        let answer = structured(&s, &schemas, "list_dex_perf_devices", serde_json::json!({"metric": "cpu"}));
        if answer["count"] == 1 {
            break answer;
        }
        assert!(started.elapsed() < PATIENCE, "never ranked: {answer}\n{}", agent.log_text());
        std::thread::sleep(Duration::from_millis(200));
    };
    let device = &ranked["devices"][0];
    assert_eq!(device["hostname"], "perf-a", "{ranked}");
    assert!(device["average"].as_f64().is_some_and(|v| (0.0..=100.0).contains(&v)), "{ranked}");
    assert!(device["samples"].as_i64().unwrap() >= 1 && device["last_sample_ms"].is_i64(), "{ranked}");

    let fleet = structured(&s, &schemas, "get_dex_perf_fleet", serde_json::json!({"window": "1h"}));
    assert_eq!(fleet["devices"]["reporting"], 1, "{fleet}");
    let cpu = fleet["metrics"].as_array().unwrap().iter().find(|m| m["metric"] == "cpu_busy_pct").unwrap();
    assert_eq!(cpu["devices"], 1, "{fleet}");
    assert!(
        cpu["p50"].as_f64().is_some() && cpu["p50"] == cpu["p99"],
        "one device: every percentile is its own: {fleet}"
    );
    // In a container the commit charge is the machine's: named, not ranked.
    let commit = structured(&s, &schemas, "list_dex_perf_devices", serde_json::json!({"metric": "commit"}));
    assert_eq!(commit["count"].as_i64().unwrap() + commit["cannot_measure_count"].as_i64().unwrap(), 1, "{commit}");

    agent.kill();
    let stopped = Instant::now();
    loop {
        let quiet = structured(&s, &schemas, "list_dex_perf_devices", serde_json::json!({"filter": "not_reporting"}));
        if quiet["count"] == 1 {
            assert_eq!(quiet["devices"][0]["hostname"], "perf-a", "{quiet}");
            break;
        }
        assert!(stopped.elapsed() < PATIENCE, "still reporting: {quiet}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let fleet = structured(&s, &schemas, "get_dex_perf_fleet", serde_json::json!({}));
    assert_eq!(
        (fleet["devices"]["reporting"].as_i64(), fleet["devices"]["not_reporting"].as_i64()),
        (Some(0), Some(1))
    );
}

/// Busy CPUs make the CPU signal fire on the device that measured them, and it ends when they
/// rest; the signal tools tell it by type, by device and one by one.
#[test]
fn a_busy_device_raises_the_cpu_signal_and_it_ends_when_it_rests() {
    let s = start(SAMPLED);
    let schemas = output_schemas(&s);
    let token = mint(&s, &[]);
    let states = tempfile::tempdir().unwrap();
    let agent = spawn_agent(&s, Some(&token), &states.path().join("busy-a"), Some("busy-a"));
    let kinds = structured(&s, &schemas, "get_guardian_schemas", serde_json::json!({}));
    let cpu = kinds["signals"].as_array().unwrap().iter().find(|k| k["obs_type"] == "cpu_sustained_high").unwrap();
    assert_eq!(cpu["metric"], "cpu_busy_pct", "{kinds}");
    let started = Instant::now();
    while structured(&s, &schemas, "list_dex_perf_devices", serde_json::json!({}))["count"] != 1 {
        assert!(started.elapsed() < PATIENCE, "no samples: {}", agent.log_text());
        std::thread::sleep(Duration::from_millis(200));
    }
    // One busy loop per CPU: the machine's (or this container's) every CPU is busy, until the
    // signal has ended (no other test burns meanwhile).
    let _cpus = common::machine_cpus_to_myself();
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let burners = Burners(
        (0..cpus)
            .map(|_| std::process::Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap())
            .collect(),
    );
    let detail = |obs_type: &str| {
        structured(&s, &schemas, "get_dex_signal_detail", serde_json::json!({"obs_type": obs_type, "window": "24h"}))
    };
    let burning = Instant::now();
    let fired = loop {
        let found = detail("cpu_sustained_high");
        if found["count"].as_i64().unwrap_or(0) >= 1 {
            break found;
        }
        assert!(burning.elapsed() < PATIENCE, "the CPU signal never fired: {found}\n{}", agent.log_text());
        std::thread::sleep(Duration::from_millis(300));
    };
    let occurrence = &fired["occurrences"][0];
    assert_eq!(occurrence["hostname"], "busy-a", "{fired}");
    assert!(occurrence["peak"].as_f64().unwrap() > 90.0 && occurrence["ended_ms"].is_null(), "{fired}");
    let listed = structured(&s, &schemas, "list_dex_signals", serde_json::json!({"window": "24h"}));
    let row = listed["signals"].as_array().unwrap().iter().find(|r| r["obs_type"] == "cpu_sustained_high").unwrap();
    assert_eq!((row["devices"].as_i64(), row["active"].as_i64()), (Some(1), Some(1)), "{listed}");
    let on_windows = structured(&s, &schemas, "list_dex_signals", serde_json::json!({"os": "windows"}));
    assert_eq!(on_windows["devices_with_signals"], 0, "no agent runs Windows: {on_windows}");
    let scope = structured(&s, &schemas, "get_dex_signal_scope", serde_json::json!({}));
    // What co-occurs with the network (list_network_devices' `cooc`): a device signal, not a
    // network one.
    let cooc = |value: &str| {
        let args = serde_json::json!({"cooc": value, "window_minutes": 5});
        structured(&s, &schemas, "list_network_devices", args)["count"].clone()
    };
    assert_eq!((cooc("device"), cooc("network_only")), (serde_json::json!(1), serde_json::json!(0)));
    // (The build machine's other tests kill processes: app_crash may hold beside it, truly.)
    let active = scope["devices"][0]["active"].as_array().unwrap();
    assert!(active.contains(&serde_json::json!("cpu_sustained_high")), "{scope}");

    drop(burners);
    let resting = Instant::now();
    loop {
        let found = detail("cpu_sustained_high");
        if found["occurrences"][0]["ended_ms"].is_i64() {
            break;
        }
        assert!(resting.elapsed() < PATIENCE, "the CPU signal never ended: {found}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let refused =
        common::call_as(&s, &s.token, "get_dex_signal_detail", serde_json::json!({"obs_type": "cpu_sustained"}));
    assert!(refused.json().to_string().contains("did you mean"), "the closest name: {}", refused.json());
}

/// Busy loops that end when dropped, even when the test fails first: one left behind would
/// starve every later test of the machine.
struct Burners(Vec<std::process::Child>);

impl Drop for Burners {
    fn drop(&mut self) {
        for burner in &mut self.0 {
            let _ = burner.kill();
            let _ = burner.wait();
        }
    }
}

//! Experience telemetry end to end (docs/experience.md): a real agent (this very binary,
//! `agent run`) samples this machine on the interval the server's welcome sets and reports
//! in batches; the server keeps every metric, or why the device cannot give it.

use crate::common;

use std::time::{Duration, Instant};

use common::agents::*;
use common::start;
use toolgate_domain::fleet::experience::METRICS;
use toolgate_domain::groups::Reach;
use toolgate_store::{DeviceExperience, SQLITE_FILE_NAME, SqliteStore};

const SAMPLED: &[&str] =
    &["--experience-sample-interval", "1s", "--experience-report-interval", "2s", "--agent-heartbeat-ms", "200"];

/// The newest experience of every device, read from the server's own store.
fn devices(data_dir: &std::path::Path) -> Vec<DeviceExperience> {
    let store = SqliteStore::open(&data_dir.join(SQLITE_FILE_NAME)).unwrap().repositories();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(store.experience.device_experience(&Reach::Fleet, None)).unwrap()
}

#[test]
fn an_agent_samples_its_host_and_the_server_keeps_every_metric_or_why_not() {
    let s = start(SAMPLED);
    let token = mint(&s, &[]);
    let states = tempfile::tempdir().unwrap();
    let agent = spawn_agent(&s, Some(&token), &states.path().join("exp-a"), Some("exp-a"));
    let started = Instant::now();
    // Two reports: the second has a round trip (the first pongs come within the first second).
    let device = loop {
        let found = devices(s.data_dir.path());
        if let Some(d) = found.first().filter(|d| d.latest.contains_key("heartbeat_rtt_ms") && d.latest.len() > 5) {
            break d.clone();
        }
        assert!(started.elapsed() < PATIENCE, "no experience after {PATIENCE:?}: {found:?}\n{}", agent.log_text());
        std::thread::sleep(Duration::from_millis(200));
    };
    for metric in METRICS {
        let measured = device.latest.contains_key(metric.name);
        assert!(measured != device.absent.contains_key(metric.name), "{}: {device:?}", metric.name);
    }
    for name in ["cpu_busy_pct", "mem_used_pct", "disk_free_pct", "net_rx_bytes_per_s", "tcp_retransmits_per_s"] {
        assert!(device.latest.contains_key(name), "{name}: {device:?}");
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

//! The network tools (docs/experience.md, "Network") over a real agent's samples of this
//! machine: the fleet's network percentiles and the devices ranked by round trip and
//! throughput; what co-occurred is checked where a signal is raised on purpose
//! (experience::a_busy_device_raises_the_cpu_signal_and_it_ends_when_it_rests).

use std::time::{Duration, Instant};

use serde_json::json;
use toolgate_domain::fleet::experience::NETWORK_METRICS;

use crate::common;
use common::agents::*;
use common::start;

#[test]
fn the_network_of_a_real_agent_is_shown_fleet_wide_and_ranked() {
    let s = start(super::experience::EVERY_SECOND);
    let schemas = output_schemas(&s);
    let token = mint(&s, &[]);
    let states = tempfile::tempdir().unwrap();
    let agent = spawn_agent(&s, Some(&token), &states.path().join("net-a"), Some("net-a"));
    let started = Instant::now();
    let fleet = loop {
        let fleet = structured(&s, &schemas, "get_network_fleet", json!({"window": "1h"}));
        let rtt = fleet["metrics"].as_array().unwrap().iter().find(|m| m["metric"] == "heartbeat_rtt_ms").cloned();
        if rtt.is_some_and(|m| m["devices"] == 1 && m["p50"].as_f64().is_some_and(|v| v > 0.0)) {
            break fleet;
        }
        assert!(started.elapsed() < PATIENCE, "no round trip measured: {fleet}\n{}", agent.log_text());
        std::thread::sleep(Duration::from_millis(300));
    };
    let shown: Vec<&str> = fleet["metrics"].as_array().unwrap().iter().map(|m| m["metric"].as_str().unwrap()).collect();
    assert_eq!(shown, NETWORK_METRICS, "the network metrics, in their declared order: {fleet}");
    assert_eq!(fleet["devices"]["reporting"], 1, "{fleet}");
    let signals: Vec<&str> =
        fleet["signals"].as_array().unwrap().iter().map(|x| x["obs_type"].as_str().unwrap()).collect();
    assert_eq!(signals, ["network_error_burst", "tcp_retransmits_high", "server_round_trip_slow"], "{fleet}");

    for metric in ["rtt", "retrans", "throughput"] {
        let ranked = structured(&s, &schemas, "list_network_devices", json!({"metric": metric, "window_minutes": 5}));
        assert_eq!(ranked["count"], 1, "{metric}: {ranked}");
        let row = &ranked["devices"][0];
        assert_eq!(row["hostname"], "net-a", "{metric}: {ranked}");
        assert!(row["average"].as_f64().is_some_and(|v| v >= 0.0) && row["signals"].is_array(), "{ranked}");
    }
    let rtt = structured(&s, &schemas, "list_network_devices", json!({}));
    assert!(rtt["devices"][0]["average"].as_f64() > Some(0.0), "a round trip takes time: {rtt}");
    let other_cohort = structured(&s, &schemas, "list_network_devices", json!({"key": "arch", "cohort_value": "vax"}));
    assert_eq!(other_cohort["count"], 0, "{other_cohort}");
    let quiet = structured(&s, &schemas, "list_network_devices", json!({"filter": "not_reporting"}));
    assert_eq!(quiet["count"], 0, "{quiet}");
    let refused = common::call_as(&s, &s.token, "list_network_devices", json!({"metric": "jitter"}));
    assert!(refused.json().to_string().contains("rtt"), "the valid metrics are named: {}", refused.json());
}

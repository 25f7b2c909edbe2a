//! Simulated experience samples (LOAD_EXPERIENCE=1): every declared metric, 12 programs with
//! their CPU time, memory and a package, and one interface, with values made up from the
//! agent's number and the minute. Synthetic, labelled as such: they load the server's ingest
//! and storage as real samples of that shape would, and say nothing of this host.

use std::collections::BTreeMap;

use toolgate_domain::fleet::experience::{AppPackage, METRICS, Sample};

/// Programs each simulated sample names (a host's 8 busiest and 8 largest overlap).
const PROGRAMS: u64 = 12;

/// A number in 0..1 from `seed` (splitmix64): the same agent and minute give the same values.
fn unit(seed: u64) -> f64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) as f64 / u64::MAX as f64
}

/// Agent `agent`'s sample at `at_ms`: each metric around a level of its own for the agent.
pub fn sample(agent: u64, at_ms: i64) -> Sample {
    let minute = (at_ms / 60_000) as u64;
    let mut values = BTreeMap::new();
    for (n, metric) in METRICS.iter().enumerate() {
        let level = unit(agent * 1000 + n as u64) * 80.0;
        let noise = unit(agent ^ (minute << 20) ^ (n as u64) << 8) * 20.0;
        values.insert(metric.name.to_string(), ((level + noise) * 1000.0).round() / 1000.0);
    }
    let mut apps = BTreeMap::new();
    let mut packages = BTreeMap::new();
    for p in 0..PROGRAMS {
        let program = format!("sim-app-{p:02}");
        let cpu = unit(agent ^ (minute << 24) ^ (p << 4)) * 30.0;
        let rss = (unit(agent * 100 + p) * 1e9).round();
        apps.insert(
            program.clone(),
            BTreeMap::from([("cpu_seconds".to_string(), cpu), ("rss_bytes".to_string(), rss)]),
        );
        packages.insert(program, AppPackage { package: format!("sim-pkg-{p:02}"), version: "1.0".into() });
    }
    let rates = ["rx_bytes_per_s", "tx_bytes_per_s", "errors_per_s", "drops_per_s"];
    let eth0 =
        rates.iter().map(|r| (r.to_string(), if r.contains("bytes") { unit(agent ^ minute) * 1e6 } else { 0.0 }));
    Sample {
        at_ms,
        values,
        fullest_filesystem: Some("/".into()),
        apps,
        interfaces: BTreeMap::from([("eth0".to_string(), eth0.collect())]),
        packages,
    }
}

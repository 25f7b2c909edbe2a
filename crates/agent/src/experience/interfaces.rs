//! Network traffic per interface (docs/experience.md, the `interfaces` breakdown): rates
//! between two readings of /proc/net/dev, and the device's totals as their sum. An interface
//! that came or went, or whose counters went back (a driver reload), has no rate that sample.

use std::collections::BTreeMap;

use toolgate_domain::fleet::parts::{Breakdown, MAX_PARTS_PER_SAMPLE};

use super::procfs::NetCounters;

/// A per-interface metric, the device metric it sums into, and its counter.
type Rate = (&'static str, &'static str, fn(&NetCounters) -> u64);

const RATES: [Rate; 4] = [
    ("rx_bytes_per_s", "net_rx_bytes_per_s", |n| n.rx_bytes),
    ("tx_bytes_per_s", "net_tx_bytes_per_s", |n| n.tx_bytes),
    ("errors_per_s", "net_errors_per_s", |n| n.errors),
    ("drops_per_s", "net_drops_per_s", |n| n.drops),
];

pub type Parts = BTreeMap<String, BTreeMap<String, f64>>;

/// The device totals (by device metric) and each interface's rates, the busiest
/// [`MAX_PARTS_PER_SAMPLE`] by name and the rest summed under the breakdown's `other`.
pub fn rates(
    now: &BTreeMap<String, NetCounters>,
    before: &BTreeMap<String, NetCounters>,
    seconds: f64,
) -> (BTreeMap<&'static str, f64>, Parts) {
    let mut totals: BTreeMap<&'static str, f64> = RATES.iter().map(|(_, device, _)| (*device, 0.0)).collect();
    let mut each: Vec<(String, BTreeMap<String, f64>)> = Vec::new();
    for (name, after) in now {
        let Some(earlier) = before.get(name) else { continue };
        if seconds <= 0.0 || RATES.iter().any(|(_, _, counter)| counter(after) < counter(earlier)) {
            continue;
        }
        let mut values = BTreeMap::new();
        for (metric, device, counter) in RATES {
            let rate = (counter(after) - counter(earlier)) as f64 / seconds;
            values.insert(metric.to_string(), rate);
            *totals.entry(device).or_default() += rate;
        }
        each.push((name.clone(), values));
    }
    (totals, bounded(each))
}

/// At most [`MAX_PARTS_PER_SAMPLE`] interfaces by traffic (a host of containers has hundreds
/// of veths); the rest summed.
fn bounded(mut each: Vec<(String, BTreeMap<String, f64>)>) -> Parts {
    let traffic = |v: &BTreeMap<String, f64>| v["rx_bytes_per_s"] + v["tx_bytes_per_s"];
    each.sort_by(|a, b| traffic(&b.1).total_cmp(&traffic(&a.1)).then_with(|| a.0.cmp(&b.0)));
    let rest = each.split_off(each.len().min(MAX_PARTS_PER_SAMPLE));
    let mut parts: Parts = each.into_iter().collect();
    for (_, values) in rest {
        let other = parts.entry(Breakdown::Interfaces.other().to_string()).or_default();
        for (metric, value) in values {
            *other.entry(metric).or_default() += value;
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(rx_bytes: u64, errors: u64) -> NetCounters {
        NetCounters { rx_bytes, tx_bytes: 0, errors, drops: 0 }
    }

    #[test]
    fn each_interface_has_its_rates_and_the_device_their_sum() {
        let before = BTreeMap::from([
            ("eth0".to_string(), counters(1000, 0)),
            ("wlan0".to_string(), counters(500, 10)),
            ("gone".to_string(), counters(1, 0)),
            ("reset".to_string(), counters(9000, 0)),
        ]);
        let now = BTreeMap::from([
            ("eth0".to_string(), counters(3000, 0)),
            ("wlan0".to_string(), counters(500, 14)),
            ("new".to_string(), counters(5, 0)),
            ("reset".to_string(), counters(10, 0)),
        ]);
        let (totals, parts) = rates(&now, &before, 2.0);
        assert_eq!(parts.keys().collect::<Vec<_>>(), ["eth0", "wlan0"], "only interfaces with two readings that rose");
        assert_eq!(parts["eth0"]["rx_bytes_per_s"], 1000.0);
        assert_eq!(parts["wlan0"]["errors_per_s"], 2.0);
        assert_eq!((totals["net_rx_bytes_per_s"], totals["net_errors_per_s"]), (1000.0, 2.0));
        assert_eq!(totals.len(), 4);
    }

    #[test]
    fn the_quietest_past_the_bound_are_summed() {
        let before: BTreeMap<String, NetCounters> = (0..70).map(|n| (format!("veth{n:02}"), counters(0, 0))).collect();
        let now: BTreeMap<String, NetCounters> = (0..70).map(|n| (format!("veth{n:02}"), counters(n, 0))).collect();
        let (totals, parts) = rates(&now, &before, 1.0);
        assert_eq!(parts.len(), MAX_PARTS_PER_SAMPLE + 1);
        assert!(parts.contains_key("veth69") && !parts.contains_key("veth00"));
        // The six quietest (0 to 5 bytes a second) are one line.
        assert_eq!(parts[Breakdown::Interfaces.other()]["rx_bytes_per_s"], 15.0);
        assert_eq!(totals["net_rx_bytes_per_s"], (0..70).sum::<u64>() as f64);
    }
}

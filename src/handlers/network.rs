//! The fleet's network (docs/experience.md, "Network"): percentiles of part 1's network metrics,
//! the interfaces with errors, devices ranked by round trip, retransmissions or throughput, and
//! what else held on them meanwhile (`cooc`). Reads go through the caller's reach in the store
//! query and through the agents the caller may see.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use toolgate_domain::fleet::experience::{NETWORK_METRICS, metric_named};
use toolgate_domain::fleet::parts::Breakdown;
use toolgate_domain::{ToolError, ToolOutput, ToolResult};
use toolgate_store::{Averaged, Occurrence, Resolution};

use super::spread::rounded;
use super::experience::{
    Device, FleetWindow, candidates, cannot_measure, newest, not_reporting, ranking, shown, window_span,
};
use crate::args;
use crate::registry::SIGNALS;
use crate::services::ToolContext;

/// tools.yaml's defaults, when a call leaves them out.
const DEFAULT_WINDOW: &str = "24h";
const DEFAULT_WINDOW_MINUTES: i64 = 15;
const DEFAULT_LIMIT: i64 = 50;
const DEFAULT_KEY: &str = "model";
/// How many of the interfaces with errors the fleet view lists.
const INTERFACES_SHOWN: usize = 10;

/// The reference's metric names and the metrics each ranks by (throughput: their sum).
const RANKED: &[(&str, &[&str])] = &[
    ("rtt", &["heartbeat_rtt_ms"]),
    ("retrans", &["tcp_retransmits_per_s"]),
    ("throughput", &["net_rx_bytes_per_s", "net_tx_bytes_per_s"]),
];

/// What a signal is about, by the metric it watches.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Concern {
    Network,
    App,
    Device,
}

fn concern(signal: &str) -> Concern {
    let metric = SIGNALS.signals.iter().find(|s| s.name == signal).map_or("", |s| s.metric.as_str());
    if NETWORK_METRICS.contains(&metric) {
        Concern::Network
    } else if Breakdown::Apps.metrics().iter().any(|m| m.explains == Some(metric)) {
        Concern::App
    } else {
        Concern::Device
    }
}

pub async fn get_network_fleet(ctx: &ToolContext, args: args::GetNetworkFleet) -> ToolResult {
    let now = ctx.services().clock().now_ms();
    let window = args.window.unwrap_or_else(|| DEFAULT_WINDOW.to_string());
    let (since_ms, resolution) = window_span(&window, now)?;
    let fleet = FleetWindow::read(ctx, &window, since_ms, resolution).await?;
    let metrics = fleet.percentiles(NETWORK_METRICS.iter().filter_map(|name| metric_named(name).ok()));
    let store = &ctx.services().repositories().experience;
    let held: Vec<Occurrence> = store
        .occurrences(ctx.reach(), since_ms, None)
        .await?
        .into_iter()
        .filter(|o| fleet.seen.contains_key(&o.agent_id) && concern(&o.signal) == Concern::Network)
        .collect();
    let signals: Vec<Value> = SIGNALS
        .signals
        .iter()
        .filter(|s| concern(&s.name) == Concern::Network)
        .map(|s| {
            let mine: Vec<&Occurrence> = held.iter().filter(|o| o.signal == s.name).collect();
            let devices: BTreeSet<&str> = mine.iter().map(|o| o.agent_id.as_str()).collect();
            let active = mine.iter().filter(|o| o.ended_ms.is_none()).count();
            json!({"obs_type": s.name, "title": s.title, "occurrences": mine.len(), "devices": devices.len(), "active": active})
        })
        .collect();
    let degraded: BTreeSet<&str> = held.iter().filter(|o| o.ended_ms.is_none()).map(|o| o.agent_id.as_str()).collect();
    let (interfaces, interfaces_count) = interfaces_with_errors(ctx, &fleet.seen, since_ms, resolution).await?;
    Ok(ToolOutput::Structured(json!({
        "window": window, "since_ms": since_ms, "generated_at_ms": now,
        "devices": fleet.devices(ctx, now),
        "degraded_devices": degraded.len(),
        "metrics": metrics,
        "signals": signals,
        "interfaces_with_errors": interfaces,
        "interfaces_with_errors_count": interfaces_count,
    })))
}

/// The interfaces whose average errors or drops a second were above zero over the window, the
/// worst first (at most [`INTERFACES_SHOWN`]), and how many in all.
async fn interfaces_with_errors(
    ctx: &ToolContext,
    seen: &BTreeMap<String, Device>,
    since_ms: i64,
    resolution: Resolution,
) -> Result<(Vec<Value>, usize), ToolError> {
    let store = &ctx.services().repositories().experience;
    let mut rates: BTreeMap<(String, String), [f64; 2]> = BTreeMap::new();
    for (at, metric) in ["errors_per_s", "drops_per_s"].into_iter().enumerate() {
        let mut sums: BTreeMap<(String, String), (f64, i64)> = BTreeMap::new();
        for v in store.part_values(Breakdown::Interfaces, ctx.reach(), metric, since_ms, resolution).await? {
            if seen.contains_key(&v.agent_id) {
                let sum = sums.entry((v.agent_id, v.part)).or_default();
                sum.0 += v.value;
                sum.1 += v.samples;
            }
        }
        for (key, (sum, samples)) in sums {
            rates.entry(key).or_default()[at] = if samples > 0 { sum / samples as f64 } else { 0.0 };
        }
    }
    let mut worst: Vec<((String, String), [f64; 2])> = rates.into_iter().filter(|(_, r)| r[0] + r[1] > 0.0).collect();
    worst.sort_by(|a, b| (b.1[0] + b.1[1]).total_cmp(&(a.1[0] + a.1[1])).then_with(|| a.0.cmp(&b.0)));
    let count = worst.len();
    let shown = worst
        .into_iter()
        .take(INTERFACES_SHOWN)
        .map(|((agent_id, interface), [errors, drops])| {
            let hostname = seen.get(&agent_id).map_or("", |d| d.hostname());
            json!({
                "agent_id": agent_id, "hostname": hostname, "interface": interface,
                "errors_per_s": rounded(errors), "drops_per_s": rounded(drops),
            })
        })
        .collect();
    Ok((shown, count))
}

pub async fn list_network_devices(ctx: &ToolContext, args: args::ListNetworkDevices) -> ToolResult {
    let now = ctx.services().clock().now_ms();
    let named = args.metric.as_deref().unwrap_or("rtt");
    let metrics = RANKED.iter().find(|(name, _)| *name == named).map(|(_, m)| *m).ok_or_else(|| {
        ToolError::InvalidArguments(format!("metric `{named}`: expected rtt, retrans or throughput"))
    })?;
    let window_minutes = args.window_minutes.unwrap_or(DEFAULT_WINDOW_MINUTES);
    let since_ms = now - window_minutes * 60_000;
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT).max(1) as usize;
    let key = args.key.as_deref().unwrap_or(DEFAULT_KEY);
    let (seen, stored) = candidates(ctx, key, args.cohort_value.as_deref()).await?;
    let experience = newest(&stored);
    let head = json!({"metric": named, "window_minutes": window_minutes, "generated_at_ms": now, "cooc": args.cooc});
    if args.filter.as_deref() == Some("not_reporting") {
        let (quiet, count) = not_reporting(ctx, &seen, &experience, limit, now);
        return Ok(ToolOutput::Structured(ranking(head, quiet, vec![], count, limit)));
    }
    let store = &ctx.services().repositories().experience;
    // What held on each device over the window, by what it is about.
    let mut held: BTreeMap<String, BTreeMap<String, Concern>> = BTreeMap::new();
    for o in store.occurrences(ctx.reach(), since_ms, None).await? {
        held.entry(o.agent_id).or_default().insert(o.signal.clone(), concern(&o.signal));
    }
    let keep = |agent_id: &str| {
        let on = held.get(agent_id);
        let any = |c: Concern| on.is_some_and(|h| h.values().any(|x| *x == c));
        match args.cooc.as_deref() {
            None => Ok(true),
            Some("device") => Ok(any(Concern::Device)),
            Some("app") => Ok(any(Concern::App)),
            Some("degraded") => Ok(any(Concern::Network)),
            Some("network_only") => Ok(any(Concern::Network) && !any(Concern::Device) && !any(Concern::App)),
            Some(other) => Err(ToolError::InvalidArguments(format!(
                "cooc `{other}`: expected device, app, network_only or degraded"
            ))),
        }
    };
    let mut averaged: BTreeMap<String, Vec<Averaged>> = BTreeMap::new();
    for metric in metrics {
        for a in store.averages(ctx.reach(), &[metric], since_ms, Resolution::Raw).await? {
            averaged.entry(a.agent_id.clone()).or_default().push(a);
        }
    }
    let mut ranked: Vec<(&Device, Averaged)> = Vec::new();
    for d in &seen {
        let Some(found) = averaged.get(&d.agent_id).filter(|a| a.len() == metrics.len()) else { continue };
        if keep(&d.agent_id)? {
            ranked.push((d, combined(found)));
        }
    }
    ranked.sort_by(|a, b| b.1.average.total_cmp(&a.1.average).then_with(|| a.0.agent_id.cmp(&b.0.agent_id)));
    let cannot = metrics.iter().flat_map(|m| cannot_measure(&seen, &experience, m)).collect();
    let count = ranked.len();
    let shown: Vec<Value> = ranked
        .into_iter()
        .take(limit)
        .map(|(d, a)| {
            let mut row = shown(d, Some(&a), Some(a.last_ms), experience.get(d.agent_id.as_str()).map(|e| e.measured.as_str()));
            let signals: Vec<&String> = held.get(&d.agent_id).map(|h| h.keys().collect()).unwrap_or_default();
            row["signals"] = json!(signals);
            row
        })
        .collect();
    Ok(ToolOutput::Structured(ranking(head, shown, cannot, count, limit)))
}

/// One device's averages of the metrics a ranking sums (throughput: received and sent), as one.
fn combined(each: &[Averaged]) -> Averaged {
    let mut sum = each[0].clone();
    for a in &each[1..] {
        sum.average += a.average;
        sum.max += a.max;
        sum.min += a.min;
        sum.samples = sum.samples.min(a.samples);
        sum.last_ms = sum.last_ms.max(a.last_ms);
    }
    sum
}

//! An app before and after an upgrade (docs/experience.md, "Programs"): its samples at the
//! baseline version against those at the candidate, on the devices of a management group, by
//! the same rank test as cohorts (Mann–Whitney U), never a bare difference of means; and the
//! devices that moved from one to the other, with when.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use toolgate_domain::fleet::rank_test::{answer, mann_whitney, median, rule};
use toolgate_domain::{ToolError, ToolOutput, ToolResult};
use toolgate_store::{DAY_MS, Resolution};

use super::app_usage::{AppUsage, Cost, Observation};
use super::spread::rounded;
use super::apps::group_agents;
use super::experience::devices;
use crate::args;
use crate::services::ToolContext;

/// tools.yaml's default window, in days.
const DEFAULT_WINDOW_DAYS: i64 = 7;
/// The most devices named as having moved between the versions (all are counted).
const UPGRADED_SHOWN: usize = 50;

/// A value per observation, when it has one.
type Measure = fn(&Cost) -> Option<f64>;

/// What is compared.
const COMPARED: [(&str, Measure); 2] =
    [("cpu_seconds_per_sample", Cost::cpu_per_sample), ("rss_bytes", Cost::rss_bytes)];

/// A version's observations: each metric's values, sorted.
fn values(observations: &[&Observation], metric: Measure) -> Vec<f64> {
    let mut values: Vec<f64> = observations.iter().filter_map(|o| metric(&o.cost)).collect();
    values.sort_by(f64::total_cmp);
    values
}

pub async fn compare_app_perf_versions(ctx: &ToolContext, args: args::CompareAppPerfVersions) -> ToolResult {
    let now = ctx.services().clock().now_ms();
    let days = args.window.unwrap_or(DEFAULT_WINDOW_DAYS);
    if args.baseline == args.candidate {
        return Err(ToolError::InvalidArguments(format!(
            "baseline and candidate are both `{}`: name two versions (get_dex_app_perf lists an app's versions)",
            args.baseline
        )));
    }
    // Samples are kept a day: a day's window compares samples, a longer one hourly averages.
    let (resolution, observations_are) =
        if days <= 1 { (Resolution::Raw, "samples") } else { (Resolution::Hourly, "hourly averages") };
    let since_ms = now - days * DAY_MS;
    let (group, members) = group_agents(ctx, &args.group).await?;
    let hostnames: BTreeMap<String, String> = devices(ctx)
        .await?
        .into_iter()
        .filter(|d| members.contains(&d.agent_id))
        .map(|d| (d.agent_id.clone(), d.hostname().to_string()))
        .collect();
    let usage = AppUsage::read(ctx, since_ms, resolution, |a| hostnames.contains_key(a)).await?;
    let programs = usage.programs(&args.app)?;
    let at = |version: &str| -> Vec<&Observation> {
        usage
            .observations
            .iter()
            .filter(|o| programs.contains(&o.program) && o.owner.version() == Some(version))
            .collect()
    };
    let (baseline, candidate) = (at(&args.baseline), at(&args.candidate));
    let versions: BTreeSet<&str> = usage
        .observations
        .iter()
        .filter(|o| programs.contains(&o.program))
        .filter_map(|o| o.owner.version())
        .collect();
    for (role, version, seen) in [("baseline", &args.baseline, &baseline), ("candidate", &args.candidate, &candidate)] {
        if seen.is_empty() {
            return Err(ToolError::NotFound(format!(
                "{role} `{version}`: `{}` ran at no such version in group `{}` over {days} days: {}",
                args.app,
                group.name,
                match versions.is_empty() {
                    true => super::apps::UNVERSIONED.to_string(),
                    false => toolgate_policy::did_you_mean(version, versions.iter().copied()),
                }
            )));
        }
    }
    let side = |version: &str, seen: &[&Observation]| {
        let devices: BTreeSet<&str> = seen.iter().map(|o| o.agent_id.as_str()).collect();
        let all = seen.iter().fold(Cost::default(), |sum, o| sum.plus(&o.cost));
        let mut shown = json!({"version": version, "devices": devices.len(), "observations": seen.len(),
            "starts": all.starts, "crashes": all.crashes, "oom_kills": all.oom_kills});
        for (name, metric) in COMPARED {
            shown[format!("{name}_median")] = json!(median(&values(seen, metric)).map(rounded));
        }
        shown
    };
    let none = "not enough data: a version has no observation of it in the window";
    let tests: serde_json::Map<String, Value> = COMPARED
        .iter()
        .map(|(name, metric)| {
            let test = mann_whitney(&values(&baseline, *metric), &values(&candidate, *metric));
            (name.to_string(), answer(test, "baseline", "candidate", none))
        })
        .collect();
    let moved = upgraded(&usage, &programs, &args.baseline, &args.candidate, &hostnames);
    Ok(ToolOutput::Structured(json!({
        "app": args.app, "programs": programs, "group": {"id": group.id, "name": group.name},
        "window_days": days, "since_ms": since_ms, "observations_are": observations_are,
        "baseline": side(&args.baseline, &baseline), "candidate": side(&args.candidate, &candidate),
        "tests": tests, "rule": rule(), "upgraded_count": moved.len(),
        "upgraded": moved.into_iter().take(UPGRADED_SHOWN).collect::<Vec<_>>(),
    })))
}

/// The devices whose samples named the baseline and later the candidate: the last sample at
/// one and the first at the other.
fn upgraded(
    usage: &AppUsage,
    programs: &BTreeSet<String>,
    baseline: &str,
    candidate: &str,
    hostnames: &BTreeMap<String, String>,
) -> Vec<Value> {
    let mut spans: BTreeMap<&str, (Option<i64>, Option<i64>)> = BTreeMap::new();
    for s in usage.spans.iter().filter(|s| programs.contains(&s.program)) {
        let (last_baseline, first_candidate) = spans.entry(s.agent_id.as_str()).or_default();
        if s.version == baseline {
            *last_baseline = Some(last_baseline.map_or(s.last_ms, |l| l.max(s.last_ms)));
        } else if s.version == candidate {
            *first_candidate = Some(first_candidate.map_or(s.first_ms, |f| f.min(s.first_ms)));
        }
    }
    spans
        .into_iter()
        .filter_map(|(agent, span)| match span {
            (Some(last), Some(first)) if first >= last => Some(json!({
                "agent_id": agent, "hostname": hostnames.get(agent).cloned().unwrap_or_default(),
                "baseline_last_seen_ms": last, "candidate_first_seen_ms": first,
            })),
            _ => None,
        })
        .collect()
}

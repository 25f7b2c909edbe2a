//! Cohorts (docs/experience.md, "Cohorts"): devices grouped by a fact, a tag or a management
//! group, each cohort's performance, and whether two cohorts really differ by a rank test
//! (Mann–Whitney U, with its p-value and effect size), never a bare difference of means.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde_json::{Value, json};
use toolgate_domain::ToolError;
use toolgate_domain::fleet::experience::RANKED;
use toolgate_domain::fleet::rank_test::{answer, mann_whitney, median, rule};
use toolgate_domain::groups::Visible;
use toolgate_domain::{ToolOutput, ToolResult};
use toolgate_policy::did_you_mean;

use super::confined;
use super::experience::{DAY_WINDOW, Device, cohort, devices, recent_views, summarised, window_span};
use crate::args;
use crate::services::ToolContext;

/// tools.yaml's defaults, when a call leaves them out.
const DEFAULT_KEY: &str = "model";
const DEFAULT_WINDOW: &str = "24h";
const DEFAULT_METRIC: &str = "cpu";
const DEFAULT_LIMIT: i64 = 50;
/// The facts a cohort may be keyed by.
const FACT_KEYS: &[&str] = &["model", "os", "os_version", "kernel", "arch", "agent_version"];
const GROUP_KEY: &str = "group";
const TAG_PREFIX: &str = "tag:";

/// Each device the caller sees (by id) with its values of `key`: one fact or tag value, or the
/// names of the management groups it is in (directly or below).
async fn cohort_values(
    ctx: &ToolContext,
    seen: &[Device],
    visible: &Visible,
    key: &str,
) -> Result<BTreeMap<String, BTreeSet<String>>, ToolError> {
    let mut values: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    if let Some(tag) = key.strip_prefix(TAG_PREFIX) {
        let known: HashSet<&str> = seen.iter().map(|d| d.agent_id.as_str()).collect();
        for (agent, tag_key, value) in ctx.services().fleet().store().all_tags().await? {
            if tag_key == tag && known.contains(agent.as_str()) {
                values.entry(agent).or_default().insert(value);
            }
        }
    } else if key == GROUP_KEY {
        let groups = ctx.services().groups();
        let all = groups.management_groups().await?;
        let names: BTreeMap<&str, &str> = all.iter().map(|g| (g.id.as_str(), g.name.as_str())).collect();
        let parents: BTreeMap<&str, Option<&str>> = all.iter().map(|g| (g.id.as_str(), g.parent_id.as_deref())).collect();
        for (agent, group) in groups.memberships().await? {
            if !visible.contains(&agent) {
                continue;
            }
            // A member of a group is in each group above it too (as reach counts it).
            let mut at = Some(group.as_str());
            while let Some(id) = at {
                if let Some(name) = names.get(id) {
                    values.entry(agent.clone()).or_default().insert(name.to_string());
                }
                at = parents.get(id).copied().flatten();
            }
        }
    } else if FACT_KEYS.contains(&key) {
        for d in seen {
            let value = cohort(d.facts.as_deref(), key);
            if !value.is_empty() {
                values.entry(d.agent_id.clone()).or_default().insert(value);
            }
        }
    } else {
        let known = FACT_KEYS.iter().copied().chain([GROUP_KEY]);
        return Err(ToolError::InvalidArguments(format!(
            "key `{key}`: {}, or tag:KEY for a tag",
            did_you_mean(key, known)
        )));
    }
    Ok(values)
}

/// The devices of each cohort.
fn cohorts(values: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut cohorts: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (agent, its) in values {
        for value in its {
            cohorts.entry(value.as_str()).or_default().insert(agent.as_str());
        }
    }
    cohorts
}

fn round(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

pub async fn get_dex_perf_cohorts(ctx: &ToolContext, args: args::GetDexPerfCohorts) -> ToolResult {
    let now = ctx.services().clock().now_ms();
    let key = args.key.unwrap_or_else(|| DEFAULT_KEY.to_string());
    let window = args.window.unwrap_or_else(|| DEFAULT_WINDOW.to_string());
    let (since_ms, resolution) = window_span(&window, now)?;
    let visible = confined::visible(ctx).await?;
    let seen = devices(ctx).await?;
    let values = cohort_values(ctx, &seen, &visible, &key).await?;
    // Each device's average of each ranked metric (by position in RANKED) over the window:
    // the day window's from the recent views, others' from the store.
    let views = if window == DAY_WINDOW { Some(recent_views(ctx).await?) } else { None };
    let mut stored: HashMap<String, [Option<f64>; RANKED.len()]> = HashMap::new();
    if views.is_none() {
        let store = &ctx.services().repositories().experience;
        for (i, (_, metric)) in RANKED.iter().enumerate() {
            for a in store.averages(ctx.reach(), &[metric], since_ms, resolution).await? {
                stored.entry(a.agent_id).or_default()[i] = Some(a.average);
            }
        }
    }
    let averages = |i: usize, agents: &BTreeSet<&str>| -> Vec<f64> {
        match &views {
            Some(views) => views.each_of(agents.iter().copied()).iter().filter_map(|v| v.day_average(RANKED[i].1)).collect(),
            None => agents.iter().filter_map(|a| stored.get(*a)?[i]).collect(),
        }
    };
    let mut shown: Vec<Value> = cohorts(&values)
        .into_iter()
        .map(|(value, agents)| {
            let metrics: serde_json::Map<String, Value> = RANKED
                .iter()
                .enumerate()
                .map(|(i, (name, _))| {
                    let mut of = averages(i, &agents);
                    of.sort_unstable_by(f64::total_cmp);
                    (name.to_string(), json!({"devices": of.len(), "median": median(&of).map(round)}))
                })
                .collect();
            json!({"value": value, "devices": agents.len(), "metrics": metrics})
        })
        .collect();
    shown.sort_by(|a, b| b["devices"].as_u64().cmp(&a["devices"].as_u64()));
    let count = shown.len();
    shown.truncate(args.limit.unwrap_or(DEFAULT_LIMIT).max(1) as usize);
    let without = seen.iter().filter(|d| !values.contains_key(&d.agent_id)).count();
    Ok(ToolOutput::Structured(json!({
        "key": key, "window": window, "since_ms": since_ms, "count": count, "cohorts": shown, "without_value": without,
    })))
}

pub async fn get_dex_perf_cohort_diff(ctx: &ToolContext, args: args::GetDexPerfCohortDiff) -> ToolResult {
    let key = format!("get_dex_perf_cohort_diff|{args:?}");
    let from_views = args.window.as_deref().unwrap_or(DEFAULT_WINDOW) == DAY_WINDOW;
    summarised(ctx, key, from_views, cohort_diff(ctx, args)).await
}

async fn cohort_diff(ctx: &ToolContext, args: args::GetDexPerfCohortDiff) -> Result<Value, ToolError> {
    let now = ctx.services().clock().now_ms();
    let key = args.key.unwrap_or_else(|| DEFAULT_KEY.to_string());
    let window = args.window.unwrap_or_else(|| DEFAULT_WINDOW.to_string());
    let named = args.metric.unwrap_or_else(|| DEFAULT_METRIC.to_string());
    let metric = RANKED.iter().find(|(name, _)| *name == named).map(|(_, m)| *m).ok_or_else(|| {
        ToolError::InvalidArguments(format!("metric `{named}`: expected cpu, commit or disk_lat"))
    })?;
    let (since_ms, resolution) = window_span(&window, now)?;
    let visible = confined::visible(ctx).await?;
    let seen = devices(ctx).await?;
    let values = cohort_values(ctx, &seen, &visible, &key).await?;
    let cohorts = cohorts(&values);
    let members = |value: &str| {
        cohorts.get(value).cloned().ok_or_else(|| {
            ToolError::InvalidArguments(format!(
                "no device you can see has {key} `{value}`: {} (get_dex_perf_cohorts lists the cohorts)",
                did_you_mean(value, cohorts.keys().copied())
            ))
        })
    };
    let (in_a, in_b) = (members(&args.a)?, members(&args.b)?);
    // Each device's observations: the day window's from the recent views (read in place),
    // others' from the store.
    let views = if window == DAY_WINDOW { Some(recent_views(ctx).await?) } else { None };
    let mut stored: HashMap<String, Vec<f64>> = HashMap::new();
    if views.is_none() {
        let store = &ctx.services().repositories().experience;
        for point in store.series(ctx.reach(), metric, since_ms, resolution).await? {
            stored.entry(point.agent_id).or_default().push(point.value);
        }
    }
    let of = |cohort: &BTreeSet<&str>| {
        let mut values: Vec<f64> = match &views {
            Some(views) => views.each_of(cohort.iter().copied()).iter().flat_map(|v| v.day_hours(metric)).map(|(_, v)| v).collect(),
            None => cohort.iter().filter_map(|agent| stored.get(*agent)).flatten().copied().collect(),
        };
        values.sort_unstable_by(f64::total_cmp);
        values
    };
    let (a, b) = (of(&in_a), of(&in_b));
    let tested = answer(
        mann_whitney(&a, &b),
        &args.a,
        &args.b,
        "not enough data: a cohort has no samples of the metric in the window",
    );
    let observations = match resolution {
        toolgate_store::Resolution::Raw => "samples",
        toolgate_store::Resolution::Hourly => "hourly averages",
        toolgate_store::Resolution::Daily => "daily averages",
    };
    let cohort = |value: &str, devices: &BTreeSet<&str>, values: &[f64]| {
        json!({"value": value, "devices": devices.len(), "observations": values.len(), "median": median(values).map(round)})
    };
    Ok(json!({
        "key": key, "metric": named, "window": window, "since_ms": since_ms, "observations_are": observations,
        "a": cohort(&args.a, &in_a, &a), "b": cohort(&args.b, &in_b, &b),
        "test": tested["test"], "differs": tested["differs"], "rule": rule(), "verdict": tested["verdict"],
    }))
}

//! Cohorts (docs/experience.md, "Cohorts"): devices grouped by a fact, a tag or a management
//! group, each cohort's performance, and whether two cohorts really differ by a rank test
//! (Mann–Whitney U, with its p-value and effect size), never a bare difference of means.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Value, json};
use toolgate_domain::ToolError;
use toolgate_domain::fleet::experience::RANKED;
use toolgate_domain::fleet::rank_test::{answer, mann_whitney, median, rule};
use toolgate_domain::groups::Visible;
use toolgate_domain::{ToolOutput, ToolResult};
use toolgate_policy::did_you_mean;

use super::confined;
use super::spread::rounded;
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

/// Which devices the caller sees hold which value of `key` (one fact or tag value, or the names
/// of the management groups a device is in, directly or below).
async fn cohort_values(ctx: &ToolContext, seen: &[Device], visible: &Visible, key: &str) -> Result<Memberships, ToolError> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    if let Some(tag) = key.strip_prefix(TAG_PREFIX) {
        let known: HashSet<&str> = seen.iter().map(|d| d.agent_id.as_str()).collect();
        let tagged = ctx.services().fleet().store().tag_values(ctx.reach(), tag).await?;
        pairs = tagged.into_iter().filter(|(agent, _)| known.contains(agent.as_str())).collect();
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
                    pairs.push((agent.clone(), name.to_string()));
                }
                at = parents.get(id).copied().flatten();
            }
        }
    } else if FACT_KEYS.contains(&key) {
        for d in seen {
            let value = cohort(d.facts.as_deref(), key);
            if !value.is_empty() {
                pairs.push((d.agent_id.clone(), value));
            }
        }
    } else {
        let known = FACT_KEYS.iter().copied().chain([GROUP_KEY]);
        return Err(ToolError::InvalidArguments(format!(
            "key `{key}`: {}, or tag:KEY for a tag",
            did_you_mean(key, known)
        )));
    }
    Ok(Memberships::new(pairs))
}

/// Which devices hold which value of a cohort key: (agent, value) pairs by agent then value,
/// each once. (A set of values per device, then a set of devices per value, was a fifth of a
/// cohort diff at 10,000 devices.)
struct Memberships(Vec<(String, String)>);

impl Memberships {
    fn new(mut pairs: Vec<(String, String)>) -> Memberships {
        pairs.sort_unstable();
        pairs.dedup();
        Memberships(pairs)
    }

    /// The devices of each cohort, each cohort's in agent order.
    fn cohorts(&self) -> BTreeMap<&str, Vec<&str>> {
        let mut cohorts: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (agent, value) in &self.0 {
            cohorts.entry(value.as_str()).or_default().push(agent.as_str());
        }
        cohorts
    }

    /// The devices that hold `value`, in agent order.
    fn members(&self, value: &str) -> Vec<&str> {
        self.0.iter().filter(|(_, v)| v == value).map(|(agent, _)| agent.as_str()).collect()
    }

    /// How many of `seen` hold no value.
    fn without_value(&self, seen: &[Device]) -> usize {
        let holding: HashSet<&str> = self.0.iter().map(|(agent, _)| agent.as_str()).collect();
        seen.iter().filter(|d| !holding.contains(d.agent_id.as_str())).count()
    }
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
    let averages = |i: usize, agents: &[&str]| -> Vec<f64> {
        match &views {
            Some(views) => views.each_of(agents.iter().copied()).iter().filter_map(|v| v.day_average(RANKED[i].1)).collect(),
            None => agents.iter().filter_map(|a| stored.get(*a)?[i]).collect(),
        }
    };
    let mut shown: Vec<Value> = values
        .cohorts()
        .into_iter()
        .map(|(value, agents)| {
            let metrics: serde_json::Map<String, Value> = RANKED
                .iter()
                .enumerate()
                .map(|(i, (name, _))| {
                    let mut of = averages(i, &agents);
                    of.sort_unstable_by(f64::total_cmp);
                    (name.to_string(), json!({"devices": of.len(), "median": median(&of).map(rounded)}))
                })
                .collect();
            json!({"value": value, "devices": agents.len(), "metrics": metrics})
        })
        .collect();
    shown.sort_by(|a, b| b["devices"].as_u64().cmp(&a["devices"].as_u64()));
    let count = shown.len();
    shown.truncate(args.limit.unwrap_or(DEFAULT_LIMIT).max(1) as usize);
    let without = values.without_value(&seen);
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
    let members = |value: &str| {
        let members = values.members(value);
        if !members.is_empty() {
            return Ok(members);
        }
        Err(ToolError::InvalidArguments(format!(
            "no device you can see has {key} `{value}`: {} (get_dex_perf_cohorts lists the cohorts)",
            did_you_mean(value, values.cohorts().keys().copied())
        )))
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
    let of = |cohort: &[&str]| {
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
    let cohort = |value: &str, devices: &[&str], values: &[f64]| {
        json!({"value": value, "devices": devices.len(), "observations": values.len(), "median": median(values).map(rounded)})
    };
    Ok(json!({
        "key": key, "metric": named, "window": window, "since_ms": since_ms, "observations_are": observations,
        "a": cohort(&args.a, &in_a, &a), "b": cohort(&args.b, &in_b, &b),
        "test": tested["test"], "differs": tested["differs"], "rule": rule(), "verdict": tested["verdict"],
    }))
}

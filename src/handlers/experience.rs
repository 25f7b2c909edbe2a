//! Endpoint experience (docs/experience.md): the fleet's percentiles and the devices that do
//! worst, from what agents measured. Every read goes through the caller's reach, in the store
//! query, and through the agents the caller may see; nothing is estimated.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_domain::fleet::experience::{METRICS, RANKED};
use toolgate_domain::fleet::{AgentStatus, HostFacts};
use toolgate_domain::{ToolError, ToolOutput, ToolResult};
use toolgate_fleet::{VIEW_RAW_MS, day_since};
use toolgate_store::{Averaged, DeviceExperience, HOUR_MS, Resolution};

use super::confined;
use super::spread::rounded;
pub(super) use super::recent_views::recent_views;
use crate::args;
use crate::services::ToolContext;

/// The fleet over a window (only a catalogue with these tools builds it).
#[path = "fleet_window.rs"]
mod fleet_window;
pub(super) use fleet_window::FleetWindow;

/// What tools.yaml gives as defaults, when a call leaves them out.
const DEFAULT_WINDOW: &str = "24h";
const DEFAULT_WINDOW_MINUTES: i64 = 15;
const DEFAULT_LIMIT: i64 = 50;

/// An unrevoked agent the caller may see, as these tools show it.
pub(super) struct Device {
    pub(super) agent_id: String,
    pub(super) status: AgentStatus,
    /// Shared with the hub: 10,000 devices' facts copied per call cost a fleet read more than
    /// its arithmetic.
    pub(super) facts: Option<Arc<HostFacts>>,
}

impl Device {
    pub(super) fn hostname(&self) -> &str {
        self.facts.as_deref().map_or("", |f| f.hostname.as_str())
    }
}

pub(super) async fn devices(ctx: &ToolContext) -> Result<Vec<Device>, ToolError> {
    let visible = confined::visible(ctx).await?;
    Ok(ctx.services().fleet().each(&visible, |view| {
        (view.status != AgentStatus::Revoked).then(|| Device {
            agent_id: view.agent_id.to_string(),
            status: view.status,
            facts: view.shared_facts(),
        })
    }))
}

/// Whether a device's newest sample is recent: within two report intervals and a sample's.
pub(super) fn reporting(ctx: &ToolContext, last_sample_ms: i64, now: i64) -> bool {
    let settings = ctx.services().fleet().settings();
    let late = 2 * settings.experience_report_ms + settings.experience_sample_ms;
    now - last_sample_ms <= late as i64
}

/// The window answered from the hub's recent views of devices (docs/experience.md, "At
/// scale"): the current hour and the 23 before it.
pub(super) const DAY_WINDOW: &str = "24h";

/// Where a fleet window (tools.yaml's 1h, 24h, 7d, 30d, all) starts, and the resolution it is
/// read at: raw samples for an hour, hourly summaries up to 30 days, daily ones for all.
pub(super) fn window_span(window: &str, now: i64) -> Result<(i64, Resolution), ToolError> {
    Ok(match window {
        "1h" => (now - HOUR_MS, Resolution::Raw),
        DAY_WINDOW => (day_since(now), Resolution::Hourly),
        "7d" => (now - 7 * 24 * HOUR_MS, Resolution::Hourly),
        "30d" => (now - 30 * 24 * HOUR_MS, Resolution::Hourly),
        "all" => (0, Resolution::Daily),
        other => return Err(ToolError::InvalidArguments(format!("window `{other}`: expected 1h, 24h, 7d, 30d or all"))),
    })
}

/// The answer `make` gives, or the one it gave the same tool (`key`: its name and arguments)
/// for the same reach within a sample interval (crate::summaries). An answer `from_views`
/// (recent views, cheap to make and always current) is made every time.
pub(super) async fn summarised(
    ctx: &ToolContext,
    key: String,
    from_views: bool,
    make: impl Future<Output = Result<Value, ToolError>>,
) -> ToolResult {
    if from_views {
        return make.await.map(ToolOutput::Structured);
    }
    let now = ctx.services().clock().now_ms();
    let key = format!("{key}|{:?}", ctx.reach());
    let max_age_ms = ctx.services().fleet().settings().experience_sample_ms as i64;
    let summaries = ctx.services().summaries();
    if let Some(kept) = summaries.fresh(&key, now, max_age_ms) {
        return Ok(ToolOutput::Structured(kept));
    }
    let made = make.await?;
    summaries.keep(key, now, &made);
    Ok(ToolOutput::Structured(made))
}

pub async fn get_dex_perf_fleet(ctx: &ToolContext, args: args::GetDexPerfFleet) -> ToolResult {
    let window = args.window.unwrap_or_else(|| DEFAULT_WINDOW.to_string());
    summarised(ctx, format!("get_dex_perf_fleet|{window}"), window == DAY_WINDOW, async {
        let now = ctx.services().clock().now_ms();
        let (since_ms, resolution) = window_span(&window, now)?;
        let fleet = FleetWindow::read(ctx, &window, since_ms, resolution).await?;
        Ok(json!({
            "window": window, "since_ms": since_ms, "generated_at_ms": now,
            "devices": fleet.devices(ctx, now),
            "metrics": fleet.percentiles(METRICS.iter()),
        }))
    })
    .await
}

/// A device's value of a fact a cohort may be keyed by (empty when it has none).
pub(super) fn cohort(facts: Option<&HostFacts>, key: &str) -> String {
    let Some(f) = facts else { return String::new() };
    match key {
        "model" => f.model.clone(),
        "os" => f.os_pretty_name.clone(),
        "os_version" => f.os_version.clone(),
        "kernel" => f.kernel.clone(),
        "arch" => f.arch.clone(),
        "agent_version" => f.agent_version.clone(),
        _ => String::new(),
    }
}

/// The devices the caller sees (of one cohort, when `cohort_value` is given).
pub(super) async fn cohort_members(
    ctx: &ToolContext,
    cohort_key: &str,
    cohort_value: Option<&str>,
) -> Result<Vec<Device>, ToolError> {
    let mut seen = devices(ctx).await?;
    if let Some(value) = cohort_value {
        seen.retain(|d| cohort(d.facts.as_deref(), cohort_key) == value);
    }
    Ok(seen)
}

/// What a device ranking starts from: the devices the caller sees (of one cohort, when
/// `cohort_value` is given) and the newest experience of each (by agent with [`newest`]).
pub(super) async fn candidates(
    ctx: &ToolContext,
    cohort_key: &str,
    cohort_value: Option<&str>,
) -> Result<(Vec<Device>, Vec<DeviceExperience>), ToolError> {
    let seen = cohort_members(ctx, cohort_key, cohort_value).await?;
    let store = &ctx.services().repositories().experience;
    Ok((seen, store.device_experience(ctx.reach(), None).await?))
}

/// Devices' newest experience by agent, borrowed: 10,000 copied per call were a tenth of a
/// ranking's time.
pub(super) type Newest<'a> = BTreeMap<&'a str, &'a DeviceExperience>;

pub(super) fn newest<'a>(all: impl IntoIterator<Item = &'a DeviceExperience>) -> Newest<'a> {
    all.into_iter().map(|d| (d.agent_id.as_str(), d)).collect()
}

/// A device's raw samples of `metric` in a window, summed up as the store would.
fn averaged(agent_id: &str, metric: &str, samples: &[(i64, f64)]) -> Option<Averaged> {
    let (last_ms, _) = *samples.last()?;
    let values = samples.iter().map(|(_, v)| *v);
    Some(Averaged {
        agent_id: agent_id.to_string(),
        metric: metric.to_string(),
        samples: samples.len() as i64,
        average: values.clone().sum::<f64>() / samples.len() as f64,
        min: values.clone().fold(f64::INFINITY, f64::min),
        max: values.fold(f64::NEG_INFINITY, f64::max),
        last_ms,
    })
}

/// A ranking's answer: its devices (at most `limit` already), those that cannot measure the
/// metric (cut to `limit`), how many of each in all, and `more` of the tool's own.
pub(super) fn ranking(head: Value, devices: Vec<Value>, mut cannot: Vec<Value>, count: usize, limit: usize) -> Value {
    let cannot_count = cannot.len();
    cannot.truncate(limit);
    let mut answer = head;
    answer["devices"] = json!(devices);
    answer["cannot_measure"] = json!(cannot);
    answer["count"] = json!(count);
    answer["cannot_measure_count"] = json!(cannot_count);
    answer
}

pub(super) fn shown(device: &Device, averaged: Option<&Averaged>, last_sample_ms: Option<i64>, measured: Option<&str>) -> Value {
    let facts = device.facts.as_deref();
    json!({
        "agent_id": device.agent_id,
        "hostname": facts.map_or("", |f| f.hostname.as_str()),
        "os": facts.map_or("", |f| f.os_pretty_name.as_str()),
        "model": facts.map_or("", |f| f.model.as_str()),
        "average": averaged.map(|a| rounded(a.average)),
        "max": averaged.map(|a| rounded(a.max)),
        "samples": averaged.map_or(0, |a| a.samples),
        "last_sample_ms": last_sample_ms,
        "measured": measured,
        "status": device.status.as_str(),
    })
}

/// The devices of `seen` whose samples stopped or never came (never first, then the longest
/// silent), at most `limit` of them, and how many in all.
pub(super) fn not_reporting(
    ctx: &ToolContext,
    seen: &[Device],
    experience: &Newest,
    limit: usize,
    now: i64,
) -> (Vec<Value>, usize) {
    let mut quiet: Vec<(Option<i64>, &Device)> = seen
        .iter()
        .map(|d| (experience.get(d.agent_id.as_str()).map(|e| e.last_sample_ms), d))
        .filter(|(last, _)| last.is_none_or(|at| !reporting(ctx, at, now)))
        .collect();
    quiet.sort_by_key(|(last, d)| (last.unwrap_or(i64::MIN), d.agent_id.clone()));
    let count = quiet.len();
    let shown = quiet
        .into_iter()
        .take(limit)
        .map(|(last, d)| shown(d, None, last, experience.get(d.agent_id.as_str()).map(|e| e.measured.as_str())))
        .collect();
    (shown, count)
}

/// Devices of `seen` that cannot measure `metric`, with their reason.
pub(super) fn cannot_measure(seen: &[Device], experience: &Newest, metric: &str) -> Vec<Value> {
    seen.iter()
        .filter_map(|d| {
            let why = experience.get(d.agent_id.as_str())?.absent.get(metric)?;
            Some(json!({"agent_id": d.agent_id, "hostname": d.hostname(), "why": why}))
        })
        .collect()
}

pub async fn list_dex_perf_devices(ctx: &ToolContext, args: args::ListDexPerfDevices) -> ToolResult {
    let key = format!("list_dex_perf_devices|{args:?}");
    let from_views = raw_in_views(args.window_minutes.unwrap_or(DEFAULT_WINDOW_MINUTES));
    summarised(ctx, key, from_views, devices_ranked(ctx, args)).await
}

/// Whether the recent views hold a raw window of `minutes`.
fn raw_in_views(minutes: i64) -> bool {
    minutes * 60_000 <= VIEW_RAW_MS
}

async fn devices_ranked(ctx: &ToolContext, args: args::ListDexPerfDevices) -> Result<Value, ToolError> {
    let now = ctx.services().clock().now_ms();
    let named = args.metric.as_deref().unwrap_or("cpu");
    let metric = RANKED.iter().find(|(name, _)| *name == named).map(|(_, m)| *m).ok_or_else(|| {
        ToolError::InvalidArguments(format!("metric `{named}`: expected cpu, commit or disk_lat"))
    })?;
    let window_minutes = args.window_minutes.unwrap_or(DEFAULT_WINDOW_MINUTES);
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT).max(1) as usize;
    let cohort_key = args.cohort_key.as_deref().unwrap_or("model");
    let head = json!({"metric": named, "window_minutes": window_minutes, "generated_at_ms": now});
    let since_ms = now - window_minutes * 60_000;
    // A window the recent views hold is answered from them (docs/experience.md, "At scale").
    let (seen, views, stored, averages) = if raw_in_views(window_minutes) {
        let seen = cohort_members(ctx, cohort_key, args.cohort_value.as_deref()).await?;
        let views = recent_views(ctx).await?;
        let averages: BTreeMap<String, Averaged> = views
            .each_of(seen.iter().map(|d| d.agent_id.as_str()))
            .into_iter()
            .filter_map(|v| {
                let agent = &v.experience.agent_id;
                Some((agent.clone(), averaged(agent, metric, v.raw_since(metric, since_ms))?))
            })
            .collect();
        (seen, Some(views), Vec::new(), averages)
    } else {
        let (seen, stored) = candidates(ctx, cohort_key, args.cohort_value.as_deref()).await?;
        let store = &ctx.services().repositories().experience;
        let averages: BTreeMap<String, Averaged> = store
            .averages(ctx.reach(), &[metric], since_ms, Resolution::Raw)
            .await?
            .into_iter()
            .map(|a| (a.agent_id.clone(), a))
            .collect();
        (seen, None, stored, averages)
    };
    let experience = match &views {
        Some(views) => newest(views.iter().map(|v| &*v.experience)),
        None => newest(&stored),
    };
    if args.filter.as_deref() == Some("not_reporting") {
        let (quiet, count) = not_reporting(ctx, &seen, &experience, limit, now);
        return Ok(ranking(head, quiet, vec![], count, limit));
    }
    let mut ranked: Vec<(&Device, &Averaged)> =
        seen.iter().filter_map(|d| averages.get(&d.agent_id).map(|a| (d, a))).collect();
    ranked.sort_by(|a, b| b.1.average.total_cmp(&a.1.average).then_with(|| a.0.agent_id.cmp(&b.0.agent_id)));
    let cannot = cannot_measure(&seen, &experience, metric);
    let count = ranked.len();
    let shown: Vec<Value> = ranked
        .into_iter()
        .take(limit)
        .map(|(d, a)| {
            let measured = experience.get(d.agent_id.as_str()).map(|e| e.measured.as_str());
            shown(d, Some(a), Some(a.last_ms), measured)
        })
        .collect();
    Ok(ranking(head, shown, cannot, count, limit))
}

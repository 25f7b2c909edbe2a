//! Experience signals (docs/experience.md, experience.yaml): what fired where and when. The
//! occurrences come from the store, confined to the caller's reach in the query; devices are
//! those the caller may see, unrevoked.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use toolgate_domain::fleet::experience::{METRICS, metric_named};
use toolgate_domain::fleet::parts::Breakdown;
use toolgate_domain::fleet::signals::{SignalType, occurrence_schema};
use toolgate_domain::fleet::{AgentStatus, HostFacts};
use toolgate_domain::{ToolError, ToolOutput, ToolResult};
use toolgate_policy::did_you_mean;
use toolgate_store::{HOUR_MS, Occurrence, PartValue, Resolution};

use super::confined;
use crate::args;
use crate::registry::SIGNALS;
use crate::services::ToolContext;

/// tools.yaml's defaults, when a call leaves them out.
const DEFAULT_WINDOW: &str = "7d";
const DEFAULT_SCOPE_LIMIT: i64 = 100;
const DEFAULT_DETAIL_LIMIT: i64 = 50;

/// The start of `window` (24h, 7d, 30d, all) before `now`.
fn since(window: &str, now: i64) -> Result<i64, ToolError> {
    match window {
        "24h" => Ok(now - 24 * HOUR_MS),
        "7d" => Ok(now - 7 * 24 * HOUR_MS),
        "30d" => Ok(now - 30 * 24 * HOUR_MS),
        "all" => Ok(0),
        other => Err(ToolError::InvalidArguments(format!("window `{other}`: expected 24h, 7d, 30d or all"))),
    }
}

/// The OS family of a device: its agents run on Linux today; Windows and macOS are named so
/// that asking for them answers with no devices, not an error.
fn family(facts: Option<&HostFacts>) -> &'static str {
    match facts.map(|f| f.os_id.as_str()) {
        Some("windows") => "windows",
        Some("macos" | "darwin") => "macos",
        _ => "linux",
    }
}

/// The devices the caller may see, unrevoked: id → (hostname, OS as shown, family).
async fn devices(ctx: &ToolContext) -> Result<BTreeMap<String, (String, String, &'static str)>, ToolError> {
    let visible = confined::visible(ctx).await?;
    Ok(ctx
        .services()
        .fleet()
        .each(&visible, |view| {
            (view.status != AgentStatus::Revoked).then(|| {
                let facts = view.facts();
                let hostname = facts.map_or("", |f| f.hostname.as_str()).to_string();
                let os = facts.map_or("", |f| f.os_pretty_name.as_str()).to_string();
                (view.agent_id.to_string(), (hostname, os, family(facts)))
            })
        })
        .into_iter()
        .collect())
}

/// The occurrences since `since_ms` on devices the caller sees in family `os` (or all).
async fn occurrences(
    ctx: &ToolContext,
    since_ms: i64,
    signal: Option<&str>,
    os: &str,
) -> Result<(Vec<Occurrence>, BTreeMap<String, (String, String, &'static str)>), ToolError> {
    let seen = devices(ctx).await?;
    let all = ctx.services().repositories().experience.occurrences(ctx.reach(), since_ms, signal).await?;
    let kept = all
        .into_iter()
        .filter(|o| seen.get(&o.agent_id).is_some_and(|(_, _, f)| os == "all" || *f == os))
        .collect();
    Ok((kept, seen))
}

fn signal_named(name: &str) -> Result<&'static SignalType, ToolError> {
    SIGNALS.signals.iter().find(|s| s.name == name).ok_or_else(|| {
        let known = SIGNALS.signals.iter().map(|s| s.name.as_str());
        ToolError::InvalidArguments(format!(
            "no signal `{name}`: {} (get_guardian_schemas lists them)",
            did_you_mean(name, known)
        ))
    })
}

pub async fn get_guardian_schemas(_ctx: &ToolContext, _args: args::GetGuardianSchemas) -> ToolResult {
    let signals: Vec<Value> = SIGNALS
        .signals
        .iter()
        .map(|s| {
            let unit = metric_named(&s.metric).map_or("", |m| m.unit);
            json!({
                "obs_type": s.name, "title": s.title, "metric": s.metric, "unit": unit,
                "condition": s.condition(), "samples": s.samples, "severity": s.severity.as_str(),
                "check_next": s.check_next,
            })
        })
        .collect();
    let metrics: Vec<Value> =
        METRICS.iter().map(|m| json!({"metric": m.name, "unit": m.unit, "description": m.description})).collect();
    Ok(ToolOutput::Structured(json!({"signals": signals, "metrics": metrics, "occurrence_schema": occurrence_schema()})))
}

pub async fn list_dex_signals(ctx: &ToolContext, args: args::ListDexSignals) -> ToolResult {
    let now = ctx.services().clock().now_ms();
    let window = args.window.unwrap_or_else(|| DEFAULT_WINDOW.to_string());
    let os = args.os.unwrap_or_else(|| "all".to_string());
    let since_ms = since(&window, now)?;
    let (found, _) = occurrences(ctx, since_ms, None, &os).await?;
    let signals: Vec<Value> = SIGNALS
        .signals
        .iter()
        .map(|s| {
            let mine: Vec<&Occurrence> = found.iter().filter(|o| o.signal == s.name).collect();
            let devices: BTreeSet<&str> = mine.iter().map(|o| o.agent_id.as_str()).collect();
            json!({
                "obs_type": s.name, "title": s.title, "severity": s.severity.as_str(),
                "occurrences": mine.len(), "devices": devices.len(),
                "active": mine.iter().filter(|o| o.ended_ms.is_none()).count(),
            })
        })
        .collect();
    let affected: BTreeSet<&str> = found.iter().map(|o| o.agent_id.as_str()).collect();
    Ok(ToolOutput::Structured(json!({
        "window": window, "os": os, "since_ms": since_ms, "signals": signals, "devices_with_signals": affected.len(),
    })))
}

pub async fn get_dex_signal_scope(ctx: &ToolContext, args: args::GetDexSignalScope) -> ToolResult {
    let now = ctx.services().clock().now_ms();
    let window = args.window.unwrap_or_else(|| DEFAULT_WINDOW.to_string());
    let since_ms = since(&window, now)?;
    let limit = args.limit.unwrap_or(DEFAULT_SCOPE_LIMIT).max(1) as usize;
    let (found, seen) = occurrences(ctx, since_ms, None, "all").await?;
    let mut by_device: BTreeMap<&str, (BTreeSet<&str>, BTreeSet<&str>)> = BTreeMap::new();
    for o in &found {
        let entry = by_device.entry(o.agent_id.as_str()).or_default();
        entry.0.insert(o.signal.as_str());
        if o.ended_ms.is_none() {
            entry.1.insert(o.signal.as_str());
        }
    }
    let count = by_device.len();
    let fullest: BTreeMap<String, Option<String>> = ctx
        .services()
        .repositories()
        .experience
        .device_experience(ctx.reach(), None)
        .await?
        .into_iter()
        .map(|d| (d.agent_id, d.fullest_filesystem))
        .collect();
    let devices: Vec<Value> = by_device
        .into_iter()
        .take(limit)
        .map(|(agent_id, (signals, active))| {
            let (hostname, os, _) = seen.get(agent_id).cloned().unwrap_or_default();
            let fullest = fullest.get(agent_id).cloned().flatten();
            json!({
                "agent_id": agent_id, "hostname": hostname, "os": os, "signals": signals, "active": active,
                "fullest_filesystem": fullest,
            })
        })
        .collect();
    Ok(ToolOutput::Structured(json!({"window": window, "since_ms": since_ms, "devices": devices, "count": count})))
}

pub async fn get_dex_signal_detail(ctx: &ToolContext, args: args::GetDexSignalDetail) -> ToolResult {
    let signal = signal_named(&args.obs_type)?;
    let now = ctx.services().clock().now_ms();
    let window = args.window.unwrap_or_else(|| DEFAULT_WINDOW.to_string());
    let os = args.os.unwrap_or_else(|| "all".to_string());
    let since_ms = since(&window, now)?;
    let limit = args.limit.unwrap_or(DEFAULT_DETAIL_LIMIT).max(0) as usize;
    let (found, seen) = occurrences(ctx, since_ms, Some(&signal.name), &os).await?;
    let mut by_os: BTreeMap<String, (usize, BTreeSet<&str>)> = BTreeMap::new();
    for o in &found {
        let shown_os = seen.get(&o.agent_id).map_or(String::new(), |(_, os, _)| os.clone());
        let entry = by_os.entry(shown_os).or_default();
        entry.0 += 1;
        entry.1.insert(o.agent_id.as_str());
    }
    let by_os: Vec<Value> = by_os
        .into_iter()
        .map(|(os, (occurrences, devices))| json!({"os": os, "occurrences": occurrences, "devices": devices.len()}))
        .collect();
    let shown = &found[..limit.min(found.len())];
    let programs = programs_behind(ctx, &signal.metric, shown).await?;
    let occurrences: Vec<Value> = shown
        .iter()
        .zip(programs)
        .map(|(o, programs)| {
            let (hostname, os, _) = seen.get(&o.agent_id).cloned().unwrap_or_default();
            let mut one = json!({
                "agent_id": o.agent_id, "hostname": hostname, "os": os, "started_ms": o.started_ms,
                "last_ms": o.last_ms, "ended_ms": o.ended_ms, "peak": (o.peak * 1000.0).round() / 1000.0,
            });
            if let Some(programs) = programs {
                one["programs"] = programs;
            }
            one
        })
        .collect();
    Ok(ToolOutput::Structured(json!({
        "obs_type": signal.name, "title": signal.title, "severity": signal.severity.as_str(),
        "condition": signal.condition(), "check_next": signal.check_next, "window": window, "since_ms": since_ms,
        "by_os": by_os, "occurrences": occurrences, "count": found.len(),
    })))
}

/// For a signal on a metric counted per program too (a program metric `explains` it): per occurrence,
/// the programs counted on its device from its first sample to its newest, most first: from the
/// raw samples while they are kept, else from the hours the occurrence fell in.
async fn programs_behind(ctx: &ToolContext, metric: &str, shown: &[Occurrence]) -> Result<Vec<Option<Value>>, ToolError> {
    let Some(per_program) = Breakdown::Apps.metrics().iter().find(|m| m.explains == Some(metric)) else {
        return Ok(vec![None; shown.len()]);
    };
    let hour_of = |at: i64| at - at.rem_euclid(HOUR_MS);
    let Some(since) = shown.iter().map(|o| hour_of(o.started_ms)).min() else { return Ok(Vec::new()) };
    let store = &ctx.services().repositories().experience;
    let raw = store.part_values(Breakdown::Apps, ctx.reach(), per_program.name, since, Resolution::Raw).await?;
    let hourly = store.part_values(Breakdown::Apps, ctx.reach(), per_program.name, since, Resolution::Hourly).await?;
    Ok(shown
        .iter()
        .map(|o| {
            let counted = counted_programs(&raw, &o.agent_id, o.started_ms, o.last_ms);
            Some(if counted.is_empty() { counted_programs(&hourly, &o.agent_id, hour_of(o.started_ms), o.last_ms) } else { counted })
        })
        .map(|programs| programs.map(|p| p.into_iter().map(|(name, count)| json!({"name": name, "count": count})).collect()))
        .collect())
}

/// The programs of `agent_id` counted from `from` to `to` (both included), most first.
fn counted_programs<'a>(values: &'a [PartValue], agent_id: &str, from: i64, to: i64) -> Vec<(&'a str, i64)> {
    let mut counts: BTreeMap<&str, f64> = BTreeMap::new();
    for v in values.iter().filter(|v| v.agent_id == agent_id && (from..=to).contains(&v.at_ms)) {
        *counts.entry(v.part.as_str()).or_default() += v.value;
    }
    let mut ranked: Vec<(&str, i64)> = counts.into_iter().map(|(name, count)| (name, count.round() as i64)).collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    ranked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_counted_within_an_occurrence_most_first() {
        let value = |agent: &str, app: &str, at_ms: i64, value: f64| PartValue {
            agent_id: agent.into(),
            part: app.into(),
            at_ms,
            value,
            samples: 1,
        };
        let values = [
            value("a", "flaky", 100, 1.0),
            value("a", "hog", 160, 2.0),
            value("a", "flaky", 220, 2.0),
            value("a", "later", 280, 9.0),
            value("b", "flaky", 160, 5.0),
        ];
        assert_eq!(counted_programs(&values, "a", 100, 220), [("flaky", 3), ("hog", 2)]);
        assert!(counted_programs(&values, "c", 0, 1000).is_empty());
    }
}

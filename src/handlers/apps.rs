//! Programs (docs/experience.md, "Programs"): what each costs fleet-wide and in a management
//! group, one program by the version of its package, and one device's programs. Every figure
//! is a sum or average of what agents sampled; a program no sample named is not guessed.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use toolgate_domain::fleet::parts::{EXITS_METRIC, TOP_PROGRAMS_NOTE};
use toolgate_domain::groups::{ManagementGroup, Visible};
use toolgate_domain::{ToolError, ToolOutput, ToolResult};

use super::app_usage::{AppUsage, Cost, Observation, Owner, by_device, by_version, totals};
use super::spread::rounded;
use super::confined;
use super::experience::{devices, window_span};
use crate::args;
use crate::services::ToolContext;

/// tools.yaml's defaults, when a call leaves them out.
const DEFAULT_WINDOW: &str = "24h";
const DEFAULT_SORT: &str = "cpu";
const DEFAULT_LIMIT: i64 = 50;
/// Why an app may show no version at all.
pub(super) const UNVERSIONED: &str = "no sample of it named a package version; an hour or day in which it was upgraded holds more than one, so a window of 1h (which reads samples) tells them apart";

/// How a ranking orders programs, by tools.yaml's `sort`.
fn cost_of(sort: &str) -> Result<fn(&Cost) -> f64, ToolError> {
    Ok(match sort {
        "cpu" => |c| c.cpu_seconds,
        "memory" => |c| c.rss_bytes().unwrap_or(0.0),
        "starts" => |c| c.starts,
        "crashes" => |c| c.crashes + c.oom_kills,
        other => {
            return Err(ToolError::InvalidArguments(format!("sort `{other}`: expected cpu, memory, starts or crashes")));
        }
    })
}

/// A management group the caller may see, by id or (where it is unique) name, and the agents
/// in it and below it.
pub(super) async fn group_agents(ctx: &ToolContext, named: &str) -> Result<(ManagementGroup, Visible), ToolError> {
    let (_, group) = super::groups::visible_group_named(ctx, named).await?;
    let reach = toolgate_domain::groups::Reach::Groups(vec![group.id.clone()].into());
    let members = ctx.services().groups().visible(&reach).await?;
    Ok((group, members))
}

/// The devices the caller sees (in `group` alone, when given), and their hostnames.
async fn seen_in(ctx: &ToolContext, group: Option<&Visible>) -> Result<BTreeMap<String, String>, ToolError> {
    Ok(devices(ctx)
        .await?
        .into_iter()
        .filter(|d| group.is_none_or(|g| g.contains(&d.agent_id)))
        .map(|d| (d.agent_id.clone(), d.hostname().to_string()))
        .collect())
}

pub async fn list_dex_perf_apps(ctx: &ToolContext, args: args::ListDexPerfApps) -> ToolResult {
    let now = ctx.services().clock().now_ms();
    let window = args.window.unwrap_or_else(|| DEFAULT_WINDOW.to_string());
    let (since_ms, resolution) = window_span(&window, now)?;
    let sort = args.sort.unwrap_or_else(|| DEFAULT_SORT.to_string());
    let cost = cost_of(&sort)?;
    let group = match &args.group_id {
        Some(id) => Some(group_agents(ctx, id).await?),
        None => None,
    };
    let seen = seen_in(ctx, group.as_ref().map(|(_, g)| g)).await?;
    let usage = AppUsage::read(ctx, since_ms, resolution, |a| seen.contains_key(a)).await?;
    let mut programs: BTreeMap<&str, Vec<&Observation>> = BTreeMap::new();
    for o in &usage.observations {
        programs.entry(o.program.as_str()).or_default().push(o);
    }
    let mut ranked: Vec<(f64, Value)> = programs
        .into_iter()
        .map(|(program, of)| {
            let all = of.iter().fold(Cost::default(), |sum, o| sum.plus(&o.cost));
            let mut shown = totals(of.iter().copied());
            shown["app"] = json!(program);
            shown["packages"] = json!(packages(&usage, program));
            (cost(&all), shown)
        })
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1["app"].as_str().cmp(&b.1["app"].as_str())));
    let count = ranked.len();
    let apps: Vec<Value> = ranked.into_iter().take(args.limit.unwrap_or(DEFAULT_LIMIT).max(1) as usize).map(|r| r.1).collect();
    Ok(ToolOutput::Structured(json!({
        "window": window, "since_ms": since_ms, "sort": sort,
        "group": group.map(|(g, _)| json!({"id": g.id, "name": g.name})),
        "devices": seen.len(), "count": count, "apps": apps,
    })))
}

/// The package versions that owned `program`, and on how many devices each.
fn packages(usage: &AppUsage, program: &str) -> Vec<Value> {
    let mut devices: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    for s in usage.spans.iter().filter(|s| s.program == program) {
        devices.entry((&s.package, &s.version)).or_default().insert(&s.agent_id);
    }
    devices.into_iter().map(|((p, v), d)| json!({"package": p, "version": v, "devices": d.len()})).collect()
}

/// One app (a program, or the programs of a package) on the devices the caller sees, in
/// `group` when given: by version and by device.
async fn app_perf(
    ctx: &ToolContext,
    app: &str,
    version: Option<&str>,
    window: Option<String>,
    limit: Option<i64>,
    group: Option<(ManagementGroup, Visible)>,
) -> ToolResult {
    let now = ctx.services().clock().now_ms();
    let window = window.unwrap_or_else(|| DEFAULT_WINDOW.to_string());
    let (since_ms, resolution) = window_span(&window, now)?;
    let seen = seen_in(ctx, group.as_ref().map(|(_, g)| g)).await?;
    let usage = AppUsage::read(ctx, since_ms, resolution, |a| seen.contains_key(a)).await?;
    let programs = usage.programs(app)?;
    let of_app = || usage.observations.iter().filter(|o| programs.contains(&o.program));
    let known: BTreeSet<&str> = of_app().filter_map(|o| o.owner.version()).collect();
    if let Some(wanted) = version
        && !known.contains(wanted)
    {
        let hint = match known.is_empty() {
            true => UNVERSIONED.to_string(),
            false => toolgate_policy::did_you_mean(wanted, known.iter().copied()),
        };
        return Err(ToolError::NotFound(format!("`{app}` ran at no version `{wanted}` in this window: {hint}")));
    }
    let chosen = || of_app().filter(|o| version.is_none_or(|v| o.owner.version() == Some(v)));
    let mut ranked: Vec<(&str, Cost)> = by_device(chosen()).into_iter().collect();
    ranked.sort_by(|a, b| b.1.cpu_seconds.total_cmp(&a.1.cpu_seconds).then(a.0.cmp(b.0)));
    let device_count = ranked.len();
    let shown_devices: Vec<Value> = ranked
        .into_iter()
        .take(limit.unwrap_or(DEFAULT_LIMIT).max(1) as usize)
        .map(|(agent, cost)| {
            let versions: BTreeSet<&str> =
                chosen().filter(|o| o.agent_id == agent).filter_map(|o| o.owner.version()).collect();
            let mut shown = cost.shown();
            shown["agent_id"] = json!(agent);
            shown["hostname"] = json!(seen.get(agent).cloned().unwrap_or_default());
            shown["versions"] = json!(versions);
            shown
        })
        .collect();
    Ok(ToolOutput::Structured(json!({
        "app": app, "programs": programs, "version": version, "window": window, "since_ms": since_ms,
        "group": group.map(|(g, _)| json!({"id": g.id, "name": g.name})),
        "totals": totals(chosen()), "versions": by_version(chosen()),
        "device_count": device_count, "devices": shown_devices,
    })))
}

pub async fn get_dex_app_perf(ctx: &ToolContext, args: args::GetDexAppPerf) -> ToolResult {
    app_perf(ctx, &args.app, args.version.as_deref(), args.window, args.limit, None).await
}

pub async fn get_dex_group_app_perf(ctx: &ToolContext, args: args::GetDexGroupAppPerf) -> ToolResult {
    let group = group_agents(ctx, &args.group_id).await?;
    app_perf(ctx, &args.app, args.version.as_deref(), args.window, args.limit, Some(group)).await
}

pub async fn get_agent_app_usage(ctx: &ToolContext, args: args::GetAgentAppUsage) -> ToolResult {
    let now = ctx.services().clock().now_ms();
    confined::one_agent(ctx, &args.agent_id).await?;
    let window = args.window.unwrap_or_else(|| DEFAULT_WINDOW.to_string());
    let (since_ms, resolution) = window_span(&window, now)?;
    let sort = args.sort.unwrap_or_else(|| DEFAULT_SORT.to_string());
    let cost = cost_of(&sort)?;
    let agent = args.agent_id.as_str();
    let usage = AppUsage::read(ctx, since_ms, resolution, |a| a == agent).await?;
    /// A program on the device: what it cost, its packages, its newest sample.
    #[derive(Default)]
    struct Used {
        cost: Cost,
        owners: BTreeSet<Owner>,
        last_ms: i64,
    }
    let mut programs: BTreeMap<&str, Used> = BTreeMap::new();
    for o in &usage.observations {
        let used = programs.entry(o.program.as_str()).or_default();
        used.cost = used.cost.plus(&o.cost);
        used.owners.insert(o.owner.clone());
        used.last_ms = used.last_ms.max(o.at_ms);
    }
    let mut ranked: Vec<(&str, Used)> = programs.into_iter().collect();
    ranked.sort_by(|a, b| cost(&b.1.cost).total_cmp(&cost(&a.1.cost)).then(a.0.cmp(b.0)));
    let count = ranked.len();
    let apps: Vec<Value> = ranked
        .into_iter()
        .take(args.limit.unwrap_or(DEFAULT_LIMIT).max(1) as usize)
        .map(|(program, used)| {
            let mut shown = used.cost.shown();
            shown["app"] = json!(program);
            shown["packages"] = json!(used.owners.iter().map(Owner::shown).collect::<Vec<_>>());
            shown["cpu_seconds_per_sample"] = json!(used.cost.cpu_per_sample().map(rounded));
            shown["last_seen_ms"] = json!(used.last_ms);
            shown
        })
        .collect();
    let store = &ctx.services().repositories().experience;
    let newest = store.device_experience(ctx.reach(), Some(agent)).await?.into_iter().next();
    let unseen = newest.as_ref().and_then(|d| d.absent.get(EXITS_METRIC).cloned());
    Ok(ToolOutput::Structured(json!({
        "agent_id": agent, "window": window, "since_ms": since_ms, "sort": sort,
        "last_sample_ms": newest.map(|d| d.last_sample_ms), "count": count, "apps": apps,
        "exits_unseen": unseen, "note": TOP_PROGRAMS_NOTE,
    })))
}

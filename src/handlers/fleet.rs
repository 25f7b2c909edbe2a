//! Agents: listing, details, tags search and the fleet's posture. Every answer comes from the
//! hub (who is connected now) and the store (what agents reported).

use std::collections::BTreeMap;

use serde_json::{Value, json};
use toolgate_domain::fleet::AgentStatus;
use toolgate_domain::{ToolError, ToolOutput, ToolResult};
use toolgate_fleet::{AgentView, Labels};

use super::confined::{one_agent, tag_index, visible};
use super::pages::Pager;
use crate::args;
use crate::services::ToolContext;

/// Page sizes default to this when the caller gives none.
pub(crate) const DEFAULT_LIMIT: i64 = 100;

pub(crate) fn hostname(view: &AgentView<'_>) -> Option<String> {
    view.facts().map(|f| f.hostname.clone())
}

fn agent_row(view: &AgentView<'_>) -> Value {
    let facts = view.facts();
    json!({
        "agent_id": view.agent_id,
        "status": view.status,
        "hostname": facts.map(|f| &f.hostname),
        "os": facts.map(|f| &f.os_pretty_name),
        "kernel": facts.map(|f| &f.kernel),
        "arch": facts.map(|f| &f.arch),
        "agent_version": facts.map(|f| &f.agent_version),
        "last_seen_ms": view.last_seen_ms(),
        "quarantine": super::quarantine::quarantine_state(view.quarantine().0, view.quarantine().1),
    })
}

/// (offset, limit) from a tool's optional paging arguments.
pub(crate) fn paging(offset: Option<i64>, limit: Option<i64>) -> (usize, usize) {
    (offset.unwrap_or(0).max(0) as usize, limit.unwrap_or(DEFAULT_LIMIT).clamp(1, 1000) as usize)
}

pub async fn list_agents(ctx: &ToolContext, args: args::ListAgents) -> ToolResult {
    let status = match args.status.as_deref() {
        None => None,
        Some(s) => Some(AgentStatus::ALL.into_iter().find(|a| a.as_str() == s).ok_or_else(|| {
            ToolError::InvalidArguments(format!("status must be online, offline or revoked, not `{s}`"))
        })?),
    };
    let tag = args.tag.as_deref().map(|t| match t.split_once('=') {
        Some((k, v)) => (k.to_string(), Some(v.to_string())),
        None => (t.to_string(), None),
    });
    let visible = visible(ctx).await?;
    let tags = if tag.is_some() { tag_index(ctx, &visible).await? } else { Default::default() };
    let labels = Labels { tags, ..Default::default() };
    let os = args.os.as_deref().map(str::to_lowercase);
    let page = Pager::of(&args, DEFAULT_LIMIT as usize)?;
    let (offset, limit) = (page.start(), page.limit());
    let keep = |view: &AgentView<'_>| {
        status.is_none_or(|s| view.status == s)
            && os.as_deref().is_none_or(|os| {
                view.facts().is_some_and(|f| f.os_id.to_lowercase() == os || f.os_name.to_lowercase().starts_with(os))
            })
            && args.quarantined.is_none_or(|q| view.quarantine().0 == q)
            && args.name_prefix.as_deref().is_none_or(|p| view.facts().is_some_and(|f| f.hostname.starts_with(p)))
            && tag.as_ref().is_none_or(|(k, v)| {
                view.tags().iter().any(|(key, value)| key == k && v.as_ref().is_none_or(|v| v == value))
            })
    };
    let mut total = 0usize;
    let agents = ctx.services().fleet().each_labelled(&visible, &labels, |view| {
        if !keep(view) {
            return None;
        }
        total += 1;
        (total > offset && total <= offset + limit).then(|| agent_row(view))
    });
    let envelope = json!({"total": total});
    page.answer(ctx, envelope, "agents", agents, total)
}

pub async fn get_agent_details(ctx: &ToolContext, args: args::GetAgentDetails) -> ToolResult {
    let visible = one_agent(ctx, &args.agent_id).await?;
    let fleet = ctx.services().fleet();
    let Some(agent) = fleet.summary(&visible, &args.agent_id) else {
        return Err(ToolError::NotFound(format!("agent `{}` is gone; list_agents lists them", args.agent_id)));
    };
    let tags = ctx.services().tags().agent_tags(&args.agent_id).await?;
    let inventory = fleet.store().inventory_status(&args.agent_id).await?;
    let quarantine = fleet
        .with_agent(&visible, &args.agent_id, |v| {
            let (wanted, reported) = v.quarantine();
            json!({"state": super::quarantine::quarantine_state(wanted, reported), "reason": v.quarantine_reason(),
                   "enforcement": super::quarantine::enforcement(v)})
        })
        .unwrap_or_default();
    Ok(ToolOutput::Structured(json!({
        "agent_id": agent.agent_id,
        "status": agent.status,
        "enrolled_at_ms": agent.enrolled_at_ms,
        "last_seen_ms": agent.last_seen_ms,
        "revoked_at_ms": agent.revoked_at_ms,
        "facts": agent.facts,
        "facts_at_ms": agent.facts_at_ms,
        "tags": tags.iter().map(|t| json!({"key": t.key, "value": t.value})).collect::<Vec<_>>(),
        "inventory": inventory.iter().map(|t| json!({"table": t.table, "available": t.available, "reason": t.reason,
            "rows": t.rows, "collected_at_ms": t.collected_at_ms})).collect::<Vec<_>>(),
        "quarantine": quarantine,
    })))
}

pub async fn search_agents_by_tag(ctx: &ToolContext, args: args::SearchAgentsByTag) -> ToolResult {
    let pager = Pager::of(&args, usize::MAX)?;
    let visible = visible(ctx).await?;
    let labels = Labels { tags: tag_index(ctx, &visible).await?, ..Default::default() };
    let agents = ctx.services().fleet().each_labelled(&visible, &labels, |view| {
        let value = view.tags().iter().find(|(k, _)| *k == args.key).map(|(_, v)| v.clone())?;
        args.value.as_ref().is_none_or(|wanted| *wanted == value).then(|| {
            json!({"agent_id": view.agent_id, "hostname": hostname(view), "status": view.status, "value": value})
        })
    });
    let (agents, count) = pager.window(agents);
    pager.answer(ctx, json!({"count": count}), "agents", agents, count)
}

pub async fn get_fleet_posture_fast(ctx: &ToolContext, args: args::GetFleetPostureFast) -> ToolResult {
    let fleet = ctx.services().fleet();
    let default_minutes = (2 * fleet.settings().inventory_interval_ms / 60_000).max(1) as i64;
    let stale_after_minutes = args.stale_after_minutes.unwrap_or(default_minutes);
    let now = ctx.services().clock().now_ms();
    let stale_before = now - stale_after_minutes * 60_000;
    let (mut counts, mut stale) = ([0usize; 3], 0usize);
    let mut by_os: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    // Counts cover only the agents the caller may see.
    fleet.each(&visible(ctx).await?, |view| {
        counts[AgentStatus::ALL.iter().position(|s| *s == view.status).unwrap_or(1)] += 1;
        if view.status == AgentStatus::Revoked {
            return None::<()>;
        }
        if view.facts_at_ms().is_none_or(|at| at < stale_before) {
            stale += 1;
        }
        let os = view.facts().map_or("unknown (never reported)".to_string(), |f| f.os_pretty_name.clone());
        let entry = by_os.entry(os).or_default();
        entry.0 += 1;
        entry.1 += usize::from(view.status == AgentStatus::Online);
        None
    });
    let by_os: Vec<Value> =
        by_os.into_iter().map(|(os, (total, online))| json!({"os": os, "total": total, "online": online})).collect();
    Ok(ToolOutput::Structured(json!({
        "total": counts.iter().sum::<usize>(),
        "online": counts[0],
        "offline": counts[1],
        "revoked": counts[2],
        "by_os": by_os,
        "stale_inventory": stale,
        "stale_after_minutes": stale_after_minutes,
        "generated_at_ms": now,
    })))
}

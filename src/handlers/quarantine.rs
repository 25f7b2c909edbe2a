//! Quarantine: the server's wish is stored, sent to the agent (now, or when it reconnects),
//! and kept by the agent across its restarts; the agent confirms the state it is in.

use serde_json::json;
use toolgate_domain::{ToolError, ToolOutput, ToolResult};

use super::confined::{one_agent, visible};
use super::pages::Pager;
use crate::args;
use crate::services::ToolContext;

/// What an operator reads: the wish and whether the agent has confirmed it.
pub(crate) fn quarantine_state(wanted: bool, reported: Option<bool>) -> &'static str {
    match (wanted, reported == Some(true)) {
        (true, true) => "active",
        (true, false) => "entering",
        (false, true) => "releasing",
        (false, false) => "none",
    }
}

/// How an agent holds a quarantine, as it last said: `{mode, why}`, or null when it never said.
pub(crate) fn enforcement(view: &toolgate_fleet::AgentView<'_>) -> serde_json::Value {
    match view.quarantine_enforcement() {
        Some(how) => json!({"mode": how.mode.as_str(), "why": how.why}),
        None => serde_json::Value::Null,
    }
}

async fn set(ctx: &ToolContext, agent_id: &str, wanted: bool, reason: Option<String>) -> ToolResult {
    let visible = one_agent(ctx, agent_id).await?;
    let fleet = ctx.services().fleet();
    if fleet.with_agent(&visible, agent_id, |v| v.summary().revoked_at_ms.is_some()).unwrap_or(false) {
        return Err(ToolError::InvalidArguments(format!("agent `{agent_id}` was revoked: it cannot connect to be told")));
    }
    fleet.set_quarantine(agent_id, wanted, reason).await?;
    let told_now = fleet.with_agent(&visible, agent_id, |v| v.status == toolgate_domain::fleet::AgentStatus::Online).unwrap_or(false);
    let (_, reported, _) = fleet.quarantine_of(agent_id).unwrap_or_default();
    let enforcement = fleet.with_agent(&visible, agent_id, enforcement).unwrap_or_default();
    Ok(ToolOutput::Structured(json!({
        "agent_id": agent_id,
        "quarantined": wanted,
        "told_now": told_now,
        "state": quarantine_state(wanted, reported),
        "enforcement": enforcement,
    })))
}

/// Network mode needs an agent that said it can cut its network (the gate's precondition
/// `quarantineEnforceable` checked it before any ticket); `mode: soft` takes any agent.
pub async fn quarantine_device(ctx: &ToolContext, args: args::QuarantineDevice) -> ToolResult {
    set(ctx, &args.agent_id, true, Some(args.reason)).await
}

pub async fn release_quarantine(ctx: &ToolContext, args: args::ReleaseQuarantine) -> ToolResult {
    set(ctx, &args.agent_id, false, None).await
}

pub async fn list_quarantined_devices(ctx: &ToolContext, args: args::ListQuarantinedDevices) -> ToolResult {
    let pager = Pager::of(&args, usize::MAX)?;
    let visible = visible(ctx).await?;
    let devices = ctx.services().fleet().each(&visible, |view| {
        let (wanted, reported) = view.quarantine();
        let state = quarantine_state(wanted, reported);
        (state != "none").then(|| {
            json!({"agent_id": view.agent_id, "hostname": view.facts().map(|f| &f.hostname), "state": state,
                   "reason": view.quarantine_reason(), "enforcement": enforcement(view)})
        })
    });
    let (devices, count) = pager.window(devices);
    pager.answer(ctx, json!({"count": count}), "devices", devices, count)
}

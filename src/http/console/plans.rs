//! The plans of a held change on the approvals page: what the change touches and how it is
//! undone, then each distinct plan with the hosts that would carry it out (identical plans
//! grouped, with counts), and the hosts that have none (offline, refused, failed to plan).
//! The form carries the digest of exactly this set: approving binds the ticket to it.

use maud::{Markup, html};
use serde_json::Value;
use toolgate_domain::approvals::Approval;
use toolgate_domain::fleet::instruction::ActionClass;
use toolgate_domain::groups::Visible;

use toolgate_gate::Reviewing;

use crate::plans::HostPlans;
use crate::registry::ToolId;
use crate::services::Services;

/// Hosts named in one group at most; the rest are counted.
const NAMED: usize = 10;

fn cell_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// `agent_id`'s host name, when the reviewer's grant covers it.
fn host(services: &Services, visible: &Visible, agent_id: &str) -> String {
    services
        .fleet()
        .with_agent(visible, agent_id, |v| v.facts().map(|f| f.hostname.clone()))
        .flatten()
        .unwrap_or_else(|| agent_id.to_string())
}

/// The plan's columns in the order the action declares them (else as the rows have them).
fn columns(plans: &HostPlans) -> Vec<String> {
    let declared = plans.definition.and_then(|d| {
        let action = crate::instructions::instructions().action(&d.plugin, &d.action)?;
        Some(action.plan.as_ref()?.iter().map(|c| c.name.clone()).collect::<Vec<_>>())
    });
    let first = plans.groups.first().and_then(|g| g.rows.first());
    declared.unwrap_or_else(|| first.map(|row| row.keys().cloned().collect()).unwrap_or_default())
}

pub fn cell(services: &Services, visible: &Visible, plans: &HostPlans) -> Markup {
    let columns = columns(plans);
    html! {
        div.plans {
            @if let Some(d) = plans.definition {
                div { strong { "Touches: " } (d.touches.as_deref().unwrap_or("")) }
                div { strong { "Undo: " } (d.undo.as_deref().unwrap_or("")) }
            }
            @if plans.still_planning > 0 {
                p.planning { (plans.still_planning) " host(s) still planning: reload the page before deciding." }
            }
            @for group in &plans.groups {
                div.plan {
                    strong { (group.agents.len()) " host" @if group.agents.len() != 1 { "s" } " with this plan: " }
                    @for agent in group.agents.iter().take(NAMED) { code { (host(services, visible, agent)) } " " }
                    @if group.agents.len() > NAMED { span.muted { "and " (group.agents.len() - NAMED) " more" } }
                    @if group.rows.is_empty() { div.muted { "nothing to change" } }
                    @else {
                        table.plan {
                            tr { @for column in &columns { th { (column) } } }
                            @for row in &group.rows {
                                tr { @for column in &columns { td { (row.get(column).map(cell_text).unwrap_or_default()) } } }
                            }
                        }
                    }
                }
            }
            @for (agent, status, error) in &plans.unplanned {
                div.unplanned {
                    code { (host(services, visible, agent)) } " " (status.as_str()) ": no plan, so it will not change"
                    @if let Some(error) = error { " (" (error) ")" }
                }
            }
        }
    }
}

/// A held bundle's changing steps, each with what it touches and how it is undone. A bundle is
/// not planned: its later steps act on what the earlier ones change, so plans made now, each
/// against the host as it is, could not be honoured (the second would always have changed).
/// The reviewer judges the declarations instead. None for any other ticket.
pub fn bundle_declarations(ticket: &Approval) -> Option<Markup> {
    let handler = ToolId::from_name(&ticket.tool)?.meta().handler;
    if handler != crate::instructions::EXECUTE_BUNDLE_HANDLER {
        return None;
    }
    let arguments: Value = serde_json::from_str(&ticket.canonical_args).ok()?;
    let set = crate::instructions::instructions();
    let changes: Vec<_> = arguments["steps"]
        .as_array()?
        .iter()
        .filter_map(|step| set.definition(step["definition"].as_str()?).ok())
        .filter(|d| d.class == ActionClass::Change)
        .collect();
    Some(html! {
        div.plans {
            p.muted { "A bundle is not planned: its later steps act on what the earlier ones change. Its changes:" }
            @for d in &changes {
                div.plan {
                    code { (d.name) }
                    div { strong { "Touches: " } (d.touches.as_deref().unwrap_or("")) }
                    div { strong { "Undo: " } (d.undo.as_deref().unwrap_or("")) }
                }
            }
        }
    })
}

/// The plans cell of the ticket `approval_id` and the digest its form carries; None for a
/// ticket without a plan. Read as the reviewer may read them.
pub async fn of_ticket(services: &Services, reviewing: &Reviewing<'_>, approval_id: &str) -> Option<(Markup, String)> {
    let unreadable =
        |why: String| Some((html! { div.muted { "the plans cannot be read now: " (why) } }, String::new()));
    let binding = match services.approvals().plan_of(approval_id).await {
        Ok(binding) => binding?,
        Err(e) => return unreadable(e.to_string()),
    };
    let online = crate::plans::online_in(services.fleet());
    let reader = reviewing.reader();
    match crate::plans::read(services.repositories(), &binding.execution_id, reader.as_ref(), &online).await {
        Ok(Some(plans)) => Some((cell(services, reviewing.visible(), &plans), plans.set_digest())),
        Ok(None) => unreadable("a host it would change lies outside your groups".into()),
        Err(e) => unreadable(e.to_string()),
    }
}

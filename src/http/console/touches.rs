//! What a held call would touch, for the reviewer deciding it: the agents its arguments name
//! (`agent_id`, `agent_ids`) or choose (`scope`, judged now among the agents its submitter's
//! grant of the tool covers, as the call would be when it runs), and the management groups it
//! names. Of the agents, the reviewer is shown only those its own grant covers: another one
//! reads as not enrolled, as an unknown id does.

use maud::{Markup, html};
use toolgate_domain::approvals::Approval;
use toolgate_domain::fleet::scope;
use toolgate_domain::targets::Targets;
use toolgate_fleet::{GroupIndex, Labels, TagIndex};
use toolgate_gate::Reviewing;

use crate::services::Services;

/// Agents listed by name at most; the rest are counted.
const SHOWN: usize = 10;

/// The agents a call's arguments name or choose: `None` when they name none.
async fn agents_of(
    services: &Services,
    reviewing: &Reviewing<'_>,
    ticket: &Approval,
    targets: &Targets,
) -> Result<Option<(Vec<String>, Option<String>)>, String> {
    let Some(expression) = targets.scope.as_deref() else {
        return Ok((!targets.agents.is_empty()).then(|| (targets.agents.clone(), None)));
    };
    let parsed = scope::parse(expression).map_err(|e| format!("its scope does not parse: {e}"))?;
    let store = services.repositories();
    let Some(reach) = reviewing.submitter_reach(ticket).await.map_err(|e| e.to_string())? else {
        // A submitter who may no longer reach anything: the scope matches nothing for them.
        return Ok(Some((Vec::new(), Some(parsed.canonical()))));
    };
    let among = store.groups.visible(&reach).await.map_err(|e| e.to_string())?;
    let tags = store.fleet.all_tags(&reach).await.map_err(|e| e.to_string())?;
    let (groups, memberships) = match (store.groups.management_groups().await, store.groups.memberships().await) {
        (Ok(g), Ok(m)) => (g, m),
        (Err(e), _) | (_, Err(e)) => return Err(e.to_string()),
    };
    let labels = Labels {
        tags: TagIndex::new(tags),
        groups: GroupIndex::new(toolgate_store::group_labels(&groups, &memberships)),
    };
    let chosen = services.fleet().each_labelled(&among, &labels, |v| parsed.matches(v).then(|| v.agent_id.to_string()));
    Ok(Some((chosen, Some(parsed.canonical()))))
}

/// The cell of the approvals table that says what the call would touch.
pub async fn cell(services: &Services, reviewing: &Reviewing<'_>, ticket: &Approval) -> Markup {
    let targets = Targets::of_canonical(&ticket.canonical_args);
    let agents = agents_of(services, reviewing, ticket, &targets).await;
    let (fleet, shown) = (services.fleet(), reviewing.visible());
    html! {
        @for group in &targets.groups { div { "management group " code { (group) } } }
        @match agents {
            Err(why) => { div.muted { "cannot tell: " (why) } }
            Ok(None) => { @if targets.groups.is_empty() { div.muted { "no agent" } } }
            Ok(Some((ids, scope))) => {
                div.touches {
                    @if let Some(scope) = scope { "scope " code { (scope) } " matches now: " }
                    strong { (ids.len()) " agent" @if ids.len() != 1 { "s" } }
                }
                ul {
                    @for id in ids.iter().take(SHOWN) {
                        li {
                            code { (id) } " "
                            @match fleet.with_agent(shown, id, |v| (v.facts().map(|f| f.hostname.clone()), v.status)) {
                                Some((host, status)) => { span.muted { (host.unwrap_or_default()) " " (status.as_str()) } }
                                None => { span.muted { "not enrolled" } }
                            }
                        }
                    }
                    @if ids.len() > SHOWN { li.muted { "and " (ids.len() - SHOWN) " more" } }
                }
            }
        }
    }
}

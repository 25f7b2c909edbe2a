//! What a held call would touch, for the reviewer deciding it: the agents its arguments name
//! (`agent_id`, `agent_ids`) or choose (`scope`, judged now against the fleet), and the
//! management group it names (`group_id`). The console's reviewers are fleet-wide (their
//! roles are read fleet-wide), so they see the whole fleet here.

use maud::{Markup, html};
use serde_json::Value;
use toolgate_domain::fleet::scope;
use toolgate_domain::groups::Visible;
use toolgate_fleet::{GroupIndex, Labels, TagIndex};

use crate::services::Services;

/// Agents listed by name at most; the rest are counted.
const SHOWN: usize = 10;

/// The agents a call's arguments name or choose: `None` when they name none.
async fn agents_of(services: &Services, arguments: &Value) -> Result<Option<(Vec<String>, Option<String>)>, String> {
    if let Some(id) = arguments.get("agent_id").and_then(Value::as_str) {
        return Ok(Some((vec![id.to_string()], None)));
    }
    if let Some(ids) = arguments.get("agent_ids").and_then(Value::as_array) {
        return Ok(Some((ids.iter().filter_map(Value::as_str).map(str::to_string).collect(), None)));
    }
    let Some(expression) = arguments.get("scope").and_then(Value::as_str) else { return Ok(None) };
    let parsed = scope::parse(expression).map_err(|e| format!("its scope does not parse: {e}"))?;
    let store = services.repositories();
    let tags = store.fleet.all_tags().await.map_err(|e| e.to_string())?;
    let (groups, memberships) = match (store.groups.management_groups().await, store.groups.memberships().await) {
        (Ok(g), Ok(m)) => (g, m),
        (Err(e), _) | (_, Err(e)) => return Err(e.to_string()),
    };
    let labels = Labels {
        tags: TagIndex::new(tags),
        groups: GroupIndex::new(toolgate_store::group_labels(&groups, &memberships)),
    };
    let chosen =
        services.fleet().each_labelled(&Visible::All, &labels, |v| parsed.matches(v).then(|| v.agent_id.to_string()));
    Ok(Some((chosen, Some(parsed.canonical()))))
}

/// The cell of the approvals table that says what the call would touch.
pub async fn cell(services: &Services, canonical_arguments: &str) -> Markup {
    let arguments: Value = serde_json::from_str(canonical_arguments).unwrap_or(Value::Null);
    let group = arguments.get("group_id").and_then(Value::as_str);
    let agents = agents_of(services, &arguments).await;
    let fleet = services.fleet();
    html! {
        @if let Some(group) = group { div { "management group " code { (group) } } }
        @match agents {
            Err(why) => { div.muted { "cannot tell: " (why) } }
            Ok(None) => { @if group.is_none() { div.muted { "no agent" } } }
            Ok(Some((ids, scope))) => {
                div.touches {
                    @if let Some(scope) = scope { "scope " code { (scope) } " matches now: " }
                    strong { (ids.len()) " agent" @if ids.len() != 1 { "s" } }
                }
                ul {
                    @for id in ids.iter().take(SHOWN) {
                        li {
                            code { (id) } " "
                            @match fleet.with_agent(&Visible::All, id, |v| (v.facts().map(|f| f.hostname.clone()), v.status)) {
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

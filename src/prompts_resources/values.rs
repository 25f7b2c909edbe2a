//! The values a completion offers and a template's listed instances come from: agent ids,
//! definition names, tag keys and values, policy ids, tool names, execution ids, pending approval ids. A caller sees
//! a source's values only when it may call the tool that lists them.

use std::collections::BTreeSet;
use toolgate_domain::groups::Reach;

use toolgate_domain::Caller;
use toolgate_domain::StoreError;
use toolgate_domain::prompts_resources::CompletionSource;

use crate::services::Services;

/// How many execution ids a source offers (the newest).
const RECENT_EXECUTIONS: usize = 200;
/// How many pending approval ids a source offers (the newest).
const RECENT_APPROVALS: i64 = 200;

/// What of `source`'s values `caller` may see: none unless its tier and roles allow the
/// listing tool, and then those of the agents that tool's grant covers.
pub fn reach_of(
    services: &Services,
    gate: &toolgate_gate::Gate,
    caller: &Caller,
    source: CompletionSource,
) -> Option<Reach> {
    let catalogue = services.catalogue();
    let tool = catalogue.tools.iter().find(|t| t.name == source.listing_tool())?;
    gate.authorize(caller, tool).ok().map(|authorized| authorized.reach)
}

/// Every value of `source`, sorted and without repeats. `context`: the values of the other
/// arguments (a tag's values are those of the `key` or `tag_key` given, if any).
pub async fn all(
    services: &Services,
    caller: &Caller,
    reach: &Reach,
    source: CompletionSource,
    context: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<Vec<String>, StoreError> {
    // Agents, and the tags on them, only as far as the caller's grant reaches.
    let visible_tags = || async {
        let visible = services.groups().visible(reach).await?;
        let mut tags = services.fleet().store().all_tags(reach).await?;
        tags.retain(|(agent, _, _)| visible.contains(agent));
        Ok::<_, StoreError>(tags)
    };
    let values: BTreeSet<String> = match source {
        CompletionSource::AgentIds => {
            services.fleet().agent_ids(&services.groups().visible(reach).await?).into_iter().collect()
        }
        CompletionSource::DefinitionNames => {
            crate::registry::INSTRUCTIONS.definitions.iter().map(|d| d.name.clone()).collect()
        }
        CompletionSource::TagKeys => visible_tags().await?.into_iter().map(|(_, k, _)| k).collect(),
        CompletionSource::TagValues => {
            let key = context("key").or_else(|| context("tag_key"));
            let tags = visible_tags().await?;
            tags.into_iter().filter(|(_, k, _)| key.as_ref().is_none_or(|want| want == k)).map(|(_, _, v)| v).collect()
        }
        CompletionSource::PolicyIds => services.fleet().rules().rules.iter().map(|r| r.id.clone()).collect(),
        CompletionSource::ToolNames => {
            let catalogue = services.catalogue();
            catalogue
                .tools
                .iter()
                .filter(|t| catalogue.decision(t, caller.tier) != toolgate_policy::Decision::Deny)
                .map(|t| t.name.to_string())
                .collect()
        }
        CompletionSource::ExecutionIds => {
            // Those the caller may read: its own, and those within its reach (another team's
            // are not offered).
            let reader = toolgate_store::Reader { principal: caller.principal.name.clone(), reach: reach.clone() };
            let page = services.repositories().work.executions(None, None, Some(&reader), 0, RECENT_EXECUTIONS).await?;
            page.into_iter().map(|e| e.execution_id).collect()
        }
        CompletionSource::ApprovalIds => {
            // The pending tickets the caller sees: its own, and those a reviewer's grant covers.
            let reviewing = services.reviewing(&caller.principal).await?;
            let pending = reviewing.tickets(services.approvals(), Some("pending"), None, RECENT_APPROVALS).await?;
            pending.into_iter().map(|a| a.id).collect()
        }
    };
    Ok(values.into_iter().collect())
}

//! The values a completion offers and a template's listed instances come from: agent ids,
//! definition names, tag keys and values, policy ids, tool names, execution ids. A caller sees
//! a source's values only when it may call the tool that lists them.

use std::collections::BTreeSet;

use toolgate_domain::Caller;
use toolgate_domain::StoreError;
use toolgate_domain::prompts_resources::CompletionSource;

use crate::services::Services;

/// How many execution ids a source offers (the newest).
const RECENT_EXECUTIONS: usize = 200;

/// Whether `caller` may see `source`'s values: its tier and roles allow the listing tool.
pub fn may_see(services: &Services, gate: &toolgate_gate::Gate, caller: &Caller, source: CompletionSource) -> bool {
    let catalogue = services.catalogue();
    catalogue
        .tools
        .iter()
        .find(|t| t.name == source.listing_tool())
        .is_some_and(|tool| gate.authorize(caller, tool).is_ok())
}

/// Every value of `source`, sorted and without repeats. `context`: the values of the other
/// arguments (a tag's values are those of the `key` or `tag_key` given, if any).
pub async fn all(
    services: &Services,
    caller: &Caller,
    source: CompletionSource,
    context: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<Vec<String>, StoreError> {
    let values: BTreeSet<String> = match source {
        CompletionSource::AgentIds => services.fleet().agent_ids().into_iter().collect(),
        CompletionSource::DefinitionNames => {
            crate::registry::INSTRUCTIONS.definitions.iter().map(|d| d.name.clone()).collect()
        }
        CompletionSource::TagKeys => {
            services.fleet().store().all_tags().await?.into_iter().map(|(_, k, _)| k).collect()
        }
        CompletionSource::TagValues => {
            let key = context("key").or_else(|| context("tag_key"));
            let tags = services.fleet().store().all_tags().await?;
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
            let page = services.repositories().work.executions(None, 0, RECENT_EXECUTIONS).await?;
            page.into_iter().map(|e| e.execution_id).collect()
        }
    };
    Ok(values.into_iter().collect())
}

//! policy.yaml `store_fault_retry` (docs/catalogue.md, check 12). Each family's patterns are declared pairs that
//! name at least one tool, no tool is in two families (its hint would depend on the order),
//! and every hint is a wait a client can honour.

use super::Inputs;
use crate::diag::Diagnostic;
use crate::model::Policy;
use crate::policy::Pattern;

/// Shorter than this and clients storm a store that is already struggling; longer and a
/// client gives up on a fault that has long cleared.
const HINT_MS: std::ops::RangeInclusive<u64> = 100..=60_000;

pub fn check(inputs: &Inputs) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let policy = &inputs.policy.model;
    let retry = &policy.store_fault_retry;
    let securables: Vec<&str> = policy.securables.iter().map(String::as_str).collect();
    let operations: Vec<&str> = policy.operations.keys().map(String::as_str).collect();
    let hint = |at: &str, ms: u64, out: &mut Vec<Diagnostic>| {
        if !HINT_MS.contains(&ms) {
            out.push(
                inputs
                    .policy_error(
                        at,
                        format!("a retry hint of {ms} ms is outside {}..={} ms", HINT_MS.start(), HINT_MS.end()),
                    )
                    .help("the seeds price store faults at 5000 ms, and 2000 ms for faster families"),
            );
        }
    };
    hint("/store_fault_retry/default_ms", retry.default_ms, &mut out);
    for (f, family) in retry.families.iter().enumerate() {
        hint(&format!("/store_fault_retry/families/{f}/ms"), family.ms, &mut out);
        for (p, text) in family.pairs.iter().enumerate() {
            let at = format!("/store_fault_retry/families/{f}/pairs/{p}");
            let before = out.len();
            super::refs::pattern(inputs, &at, text, &securables, &operations, &mut out);
            let Ok(pattern) = Pattern::parse(text) else { continue };
            let used = inputs.tools.model.tools.iter().any(|t| pattern.matches(&t.securable, &t.operation));
            if out.len() == before && !used {
                out.push(
                    inputs
                        .policy_error(&at, format!("`{text}` in retry family `{}` matches no tool", family.name))
                        .help("remove it, or name the pair of the tools it is meant for"),
                );
            }
        }
    }
    for (i, tool) in inputs.tools.model.tools.iter().enumerate() {
        let families: Vec<&str> = families_of(policy, &tool.securable, &tool.operation).map(|(name, _)| name).collect();
        if let [first, second, ..] = families[..] {
            out.push(
                inputs
                    .tool_error(i, "/securable", format!("`{}:{}` is in two retry families, `{first}` and `{second}`", tool.securable, tool.operation))
                    .help("a tool's store-fault hint must not depend on the order of policy.yaml: narrow one family's pairs"),
            );
        }
    }
    out
}

fn families_of<'a>(policy: &'a Policy, securable: &'a str, operation: &'a str) -> impl Iterator<Item = (&'a str, u64)> {
    policy.store_fault_retry.families.iter().filter_map(move |family| {
        let member =
            family.pairs.iter().filter_map(|p| Pattern::parse(p).ok()).any(|p| p.matches(securable, operation));
        member.then_some((family.name.as_str(), family.ms))
    })
}

/// The store-fault retry hint of a tool with this pair: its family's, else the default.
pub fn hint_ms(policy: &Policy, securable: &str, operation: &str) -> u64 {
    families_of(policy, securable, operation).next().map_or(policy.store_fault_retry.default_ms, |(_, ms)| ms)
}

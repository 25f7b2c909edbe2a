//! policy.yaml `engines` (docs/policy.md): the human-only roles and the credential tier are
//! declared names, the administrator-class permissions are patterns over declared names, the
//! quota is within bounds, and no role that grants an administrator-class permission can be
//! held by an engine principal (it must be human-only).

use toolgate_policy::{Pattern, did_you_mean};

use super::Inputs;
use super::refs::pattern;
use crate::diag::Diagnostic;

/// The largest quota figures the policy may set (far past what one server can serve).
const MAX_PER_MINUTE: u32 = 100_000;
const MAX_CONCURRENT: u32 = 10_000;

pub fn check(inputs: &Inputs) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let policy = &inputs.policy.model;
    let engines = &policy.engines;
    let roles: Vec<&str> = policy.roles.iter().map(|r| r.name.as_str()).collect();
    for (i, role) in engines.human_only_roles.iter().enumerate() {
        if !roles.contains(&role.as_str()) {
            out.push(
                inputs
                    .policy_error(&format!("/engines/human_only_roles/{i}"), format!("role `{role}` is not declared"))
                    .help(did_you_mean(role, roles.iter().copied())),
            );
        }
    }
    let securables: Vec<&str> = policy.securables.iter().map(String::as_str).collect();
    let operations: Vec<&str> = policy.operations.keys().map(String::as_str).collect();
    for (i, text) in engines.administrator_permissions.iter().enumerate() {
        pattern(inputs, &format!("/engines/administrator_permissions/{i}"), text, &securables, &operations, &mut out);
    }
    if let Some(tier) = &engines.credential_tier
        && !policy.tiers.iter().any(|t| &t.name == tier)
    {
        out.push(
            inputs
                .policy_error("/engines/credential_tier", format!("tier `{tier}` is not declared"))
                .help(did_you_mean(tier, policy.tiers.iter().map(|t| t.name.as_str()))),
        );
    }
    let quota = engines.quota;
    for (key, value, max) in [
        ("requests_per_minute", quota.requests_per_minute, MAX_PER_MINUTE),
        ("concurrent_requests", quota.concurrent_requests, MAX_CONCURRENT),
    ] {
        if !(1..=max).contains(&value) {
            out.push(
                inputs
                    .policy_error(
                        &format!("/engines/quota/{key}"),
                        format!("`{key}` is {value}: it must be 1 to {max}"),
                    )
                    .help("a quota of 0 would refuse every request; give each engine principal at least one"),
            );
        }
    }
    out.extend(administrators_are_human_only(inputs));
    out
}

/// Every role (its `includes` followed) that grants some administrator-class pair is in
/// `human_only_roles`.
fn administrators_are_human_only(inputs: &Inputs) -> Vec<Diagnostic> {
    let policy = &inputs.policy.model;
    let engines = &policy.engines;
    let admin: Vec<(&str, Pattern<String>)> = engines
        .administrator_permissions
        .iter()
        .filter_map(|text| Pattern::parse(text).ok().map(|p| (text.as_str(), p)))
        .collect();
    let mut out = Vec::new();
    for (r, role) in policy.roles.iter().enumerate() {
        if engines.human_only_roles.contains(&role.name) {
            continue;
        }
        let grants = crate::policy::role_grants(policy, role);
        let hit = grants
            .iter()
            .filter_map(|g| Pattern::parse(g).ok().map(|p| (*g, p)))
            .find_map(|(g, granted)| admin.iter().find(|(_, a)| granted.overlaps(a)).map(|(text, _)| (g, *text)));
        if let Some((granted, administrative)) = hit {
            out.push(
                inputs
                    .policy_error(
                        &format!("/roles/{r}/name"),
                        format!(
                            "role `{}` grants `{granted}`, which covers the administrator-class `{administrative}` (engines.administrator_permissions), yet an engine principal may hold it",
                            role.name
                        ),
                    )
                    .help(format!("add `{}` to engines.human_only_roles, or stop it granting `{administrative}`", role.name)),
            );
        }
    }
    out
}

//! Rule 7: every tool is callable by some tier, and every rule and role grant matches a tool
//! (unless it says `expect_unused` and why).

use super::Inputs;
use crate::diag::Diagnostic;
use crate::model::Rule;
use crate::policy::{self, Decision, Pattern};

pub fn check(inputs: &Inputs) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let policy = &inputs.policy.model;
    let tools = &inputs.tools.model.tools;
    let pairs: Vec<(&str, &str)> = tools.iter().map(|t| (t.securable.as_str(), t.operation.as_str())).collect();

    for (i, tool) in tools.iter().enumerate() {
        let callable = policy.tiers.iter().any(|tier| {
            policy::decide(policy, &tier.name, &tool.securable, &tool.operation).decision != Decision::Deny
        });
        if !callable && !policy.tiers.is_empty() {
            out.push(
                inputs
                    .tool_error(i, "/operation", format!("no tier allows `{}:{}`, so no client could ever call this tool", tool.securable, tool.operation))
                    .help(format!("add `{}:{}` to a tier's `allow` in policy.yaml (with an `approval` rule if a human must confirm)", tool.securable, tool.operation)),
            );
        }
    }

    for (t, tier) in policy.tiers.iter().enumerate() {
        unused(
            inputs,
            &format!("/tiers/{t}/allow"),
            &format!("tier `{}` allow", tier.name),
            &tier.allow,
            &pairs,
            &mut out,
        );
        unused(
            inputs,
            &format!("/tiers/{t}/approval"),
            &format!("tier `{}` approval", tier.name),
            &tier.approval,
            &pairs,
            &mut out,
        );
        unused(
            inputs,
            &format!("/tiers/{t}/confirm"),
            &format!("tier `{}` confirm", tier.name),
            &tier.confirm,
            &pairs,
            &mut out,
        );
        confirm_and_approval(inputs, t, &pairs, &mut out);
        for (k, rule) in tier.approval.iter().enumerate() {
            let Ok(p) = Pattern::parse(rule.pattern()) else {
                continue;
            };
            let allowed_somewhere = pairs.iter().any(|(s, o)| {
                p.matches(s, o) && policy::decide(policy, &tier.name, s, o).decision == Decision::ApprovalRequired
            });
            let matches_tool = pairs.iter().any(|(s, o)| p.matches(s, o));
            if matches_tool && !allowed_somewhere {
                out.push(
                    inputs
                        .policy_warning(&format!("/tiers/{t}/approval/{k}"), format!("tier `{}` approval rule `{}` has no effect: the tier does not allow the tools it matches", tier.name, rule.pattern()))
                        .help("add the pair to the tier's `allow`, or remove the approval rule"),
                );
            }
        }
    }
    for (r, role) in policy.roles.iter().enumerate() {
        unused(
            inputs,
            &format!("/roles/{r}/permissions"),
            &format!("role `{}`", role.name),
            &role.permissions,
            &pairs,
            &mut out,
        );
    }
    out
}

/// A `confirm` rule may not match what an `approval` rule of the same tier matches: a
/// client's own user clicking "yes" is a safety net, never a second person's decision, so a
/// pair that needs a person's approval must not look as if a confirmation could do.
fn confirm_and_approval(inputs: &Inputs, t: usize, pairs: &[(&str, &str)], out: &mut Vec<Diagnostic>) {
    let tier = &inputs.policy.model.tiers[t];
    let approval: Vec<Pattern<String>> =
        tier.approval.iter().filter_map(|r| Pattern::parse(r.pattern()).ok()).collect();
    for (k, rule) in tier.confirm.iter().enumerate() {
        let Ok(p) = Pattern::parse(rule.pattern()) else {
            continue;
        };
        let both: Vec<String> = pairs
            .iter()
            .filter(|(s, o)| p.matches(s, o) && approval.iter().any(|a| a.matches(s, o)))
            .map(|(s, o)| format!("{s}:{o}"))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if let Some(first) = both.first() {
            out.push(
                inputs
                    .policy_error(
                        &format!("/tiers/{t}/confirm/{k}"),
                        format!(
                            "tier `{}` confirm rule `{}` matches `{first}`{}, which its approval rules already gate: a pair needs a person's approval or the client's confirmation, never both",
                            tier.name,
                            rule.pattern(),
                            if both.len() > 1 { format!(" (and {} more)", both.len() - 1) } else { String::new() }
                        ),
                    )
                    .help("a confirmation comes from the caller's own client and proves no second person looked; keep `approval` for these pairs and narrow the confirm rule to pairs that need no approval"),
            );
        }
    }
}

fn unused(
    inputs: &Inputs,
    pointer: &str,
    owner: &str,
    rules: &[Rule],
    pairs: &[(&str, &str)],
    out: &mut Vec<Diagnostic>,
) {
    for (k, rule) in rules.iter().enumerate() {
        let Ok(p) = Pattern::parse(rule.pattern()) else {
            continue;
        };
        // A rule naming something undeclared is already an error; "matches no tool" adds nothing.
        let policy = &inputs.policy.model;
        let declared = p.securable.as_ref().is_none_or(|s| policy.securables.contains(s))
            && p.operation.as_ref().is_none_or(|o| policy.operations.contains_key(o));
        if !declared {
            continue;
        }
        let used = pairs.iter().any(|(s, o)| p.matches(s, o));
        match (used, rule.expects_unused()) {
            (false, false) => out.push(
                inputs
                    .policy_warning(
                        &format!("{pointer}/{k}"),
                        format!("{owner} rule `{}` matches no tool", rule.pattern()),
                    )
                    .help(format!(
                        "remove it, or keep it on purpose as `{{pair: \"{}\", expect_unused: \"why\"}}`",
                        rule.pattern()
                    )),
            ),
            (true, true) => out.push(
                inputs
                    .policy_warning(
                        &format!("{pointer}/{k}/expect_unused"),
                        format!("{owner} rule `{}` says expect_unused, but a tool matches it now", rule.pattern()),
                    )
                    .help(format!("write it as the plain string \"{}\"", rule.pattern())),
            ),
            _ => {}
        }
    }
}

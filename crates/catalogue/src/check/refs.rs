//! Rule 3: every securable, operation, tier and role a file names is declared in policy.yaml;
//! every pattern parses. Misspellings come back with the closest valid names.

use std::collections::HashSet;

use super::Inputs;
use crate::diag::{Diagnostic, did_you_mean};
use crate::model::Rule;
use crate::policy::Pattern;

pub fn check(inputs: &Inputs) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let policy = &inputs.policy.model;
    let securables: Vec<&str> = policy.securables.iter().map(String::as_str).collect();
    let operations: Vec<&str> = policy.operations.keys().map(String::as_str).collect();

    for (i, tool) in inputs.tools.model.tools.iter().enumerate() {
        if !securables.contains(&tool.securable.as_str()) {
            out.push(
                inputs
                    .tool_error(
                        i,
                        "/securable",
                        format!("securable `{}` is not declared in policy.yaml", tool.securable),
                    )
                    .help(did_you_mean(&tool.securable, securables.iter().copied())),
            );
        }
        if !operations.contains(&tool.operation.as_str()) {
            out.push(
                inputs
                    .tool_error(
                        i,
                        "/operation",
                        format!("operation `{}` is not declared in policy.yaml", tool.operation),
                    )
                    .help(did_you_mean(&tool.operation, operations.iter().copied())),
            );
        }
    }

    duplicates(inputs, "securables", policy.securables.iter().map(String::as_str), &mut out);
    duplicates(inputs, "tiers", policy.tiers.iter().map(|t| t.name.as_str()), &mut out);
    duplicates(inputs, "roles", policy.roles.iter().map(|r| r.name.as_str()), &mut out);

    for (t, tier) in policy.tiers.iter().enumerate() {
        if !tier.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
            || tier.name.is_empty()
        {
            out.push(inputs.policy_error(
                &format!("/tiers/{t}/name"),
                format!("tier name `{}` must be lowercase letters, digits, `_` or `-` (tokens carry it)", tier.name),
            ));
        }
        rules(inputs, &format!("/tiers/{t}/allow"), &tier.allow, &securables, &operations, &mut out);
        rules(inputs, &format!("/tiers/{t}/approval"), &tier.approval, &securables, &operations, &mut out);
        rules(inputs, &format!("/tiers/{t}/confirm"), &tier.confirm, &securables, &operations, &mut out);
    }
    let role_names: Vec<&str> = policy.roles.iter().map(|r| r.name.as_str()).collect();
    for (r, role) in policy.roles.iter().enumerate() {
        rules(inputs, &format!("/roles/{r}/permissions"), &role.permissions, &securables, &operations, &mut out);
        for (k, included) in role.includes.iter().enumerate() {
            if !role_names.contains(&included.as_str()) {
                out.push(
                    inputs
                        .policy_error(
                            &format!("/roles/{r}/includes/{k}"),
                            format!("role `{}` includes unknown role `{included}`", role.name),
                        )
                        .help(did_you_mean(included, role_names.iter().copied())),
                );
            } else if reaches(inputs, included, &role.name) {
                out.push(inputs.policy_error(
                    &format!("/roles/{r}/includes/{k}"),
                    format!(
                        "role `{}` includes `{included}`, which includes `{}` again: a cycle",
                        role.name, role.name
                    ),
                ));
            }
        }
    }
    for (i, securable) in policy.fleet_only.iter().enumerate() {
        if !securables.contains(&securable.as_str()) {
            out.push(
                inputs
                    .policy_error(
                        &format!("/fleet_only/{i}"),
                        format!("`fleet_only` names undeclared securable `{securable}`"),
                    )
                    .help(did_you_mean(securable, securables.iter().copied())),
            );
        }
    }
    server_names(inputs, &securables, &operations, &mut out);
    out
}

/// policy.yaml `server`: each name exists, each permission is one concrete pair, and the
/// first-start principal can do what only it can do on a fresh install (review, manage).
fn server_names(inputs: &Inputs, securables: &[&str], operations: &[&str], out: &mut Vec<Diagnostic>) {
    let policy = &inputs.policy.model;
    let names = &policy.server;
    let roles: Vec<&str> = policy.roles.iter().map(|r| r.name.as_str()).collect();
    let tiers: Vec<&str> = policy.tiers.iter().map(|t| t.name.as_str()).collect();
    let known_role = roles.contains(&names.first_start_role.as_str());
    if !known_role {
        out.push(
            inputs
                .policy_error("/server/first_start_role", format!("role `{}` is not declared", names.first_start_role))
                .help(did_you_mean(&names.first_start_role, roles.iter().copied())),
        );
    }
    for (key, role) in
        [("group_owner_role", &names.group_owner_role), ("rbac_administrator_role", &names.rbac_administrator_role)]
    {
        if let Some(role) = role.as_deref().filter(|r| !roles.contains(r)) {
            out.push(
                inputs
                    .policy_error(&format!("/server/{key}"), format!("role `{role}` is not declared"))
                    .help(did_you_mean(role, roles.iter().copied())),
            );
        }
    }
    if !tiers.contains(&names.demo_token_tier.as_str()) {
        out.push(
            inputs
                .policy_error("/server/demo_token_tier", format!("tier `{}` is not declared", names.demo_token_tier))
                .help(did_you_mean(&names.demo_token_tier, tiers.iter().copied())),
        );
    }
    for (key, text) in [
        ("reviewer_permission", &names.reviewer_permission),
        ("principal_admin_permission", &names.principal_admin_permission),
    ] {
        let at = format!("/server/{key}");
        let before = out.len();
        match Pattern::parse(text) {
            Ok(p) if p.securable.is_some() && p.operation.is_some() => {
                pattern(inputs, &at, text, securables, operations, out)
            }
            _ => out.push(
                inputs
                    .policy_error(&at, format!("`{text}` must be one `Securable:Operation` pair, without `*`"))
                    .help("e.g. `Approval:Write`"),
            ),
        }
        if known_role && out.len() == before {
            let role = policy.roles.iter().find(|r| r.name == names.first_start_role).expect("checked above");
            let granted = crate::policy::role_grants(policy, role)
                .iter()
                .filter_map(|g| Pattern::parse(g).ok())
                .any(|g| text.split_once(':').is_some_and(|(s, o)| g.matches(s, o)));
            if !granted {
                out.push(
                    inputs
                        .policy_error(
                            &at,
                            format!("the first-start role `{}` does not grant `{text}`", names.first_start_role),
                        )
                        .help("on a fresh install nobody else could; grant it to that role or pick another role"),
                );
            }
        }
    }
}

fn reaches(inputs: &Inputs, from: &str, target: &str) -> bool {
    let roles = &inputs.policy.model.roles;
    let mut seen = HashSet::new();
    let mut stack = vec![from];
    while let Some(name) = stack.pop() {
        if name == target {
            return true;
        }
        if !seen.insert(name) {
            continue;
        }
        if let Some(role) = roles.iter().find(|r| r.name == name) {
            stack.extend(role.includes.iter().map(String::as_str));
        }
    }
    false
}

fn duplicates<'a>(inputs: &Inputs, list: &str, names: impl Iterator<Item = &'a str>, out: &mut Vec<Diagnostic>) {
    let mut seen = HashSet::new();
    for (i, name) in names.enumerate() {
        if !seen.insert(name) {
            let pointer = if list == "securables" { format!("/{list}/{i}") } else { format!("/{list}/{i}/name") };
            out.push(inputs.policy_error(&pointer, format!("`{name}` is declared twice in `{list}`")));
        }
    }
}

fn rules(
    inputs: &Inputs,
    pointer: &str,
    rules: &[Rule],
    securables: &[&str],
    operations: &[&str],
    out: &mut Vec<Diagnostic>,
) {
    for (k, rule) in rules.iter().enumerate() {
        let at = match rule {
            Rule::Plain(_) => format!("{pointer}/{k}"),
            Rule::Expected { .. } => format!("{pointer}/{k}/pair"),
        };
        pattern(inputs, &at, rule.pattern(), securables, operations, out);
    }
}

/// One `Securable:Operation` pattern at `at`: it parses and names declared sides.
pub(super) fn pattern(
    inputs: &Inputs,
    at: &str,
    text: &str,
    securables: &[&str],
    operations: &[&str],
    out: &mut Vec<Diagnostic>,
) {
    match Pattern::parse(text) {
        Err(why) => {
            out.push(inputs.policy_error(at, why).help("write `Securable:Operation`, e.g. `Tag:Delete` or `*:Read`"))
        }
        Ok(p) => {
            if let Some(s) = &p.securable
                && !securables.contains(&s.as_str())
            {
                out.push(
                    inputs
                        .policy_error(at, format!("rule `{text}` names undeclared securable `{s}`"))
                        .help(did_you_mean(s, securables.iter().copied())),
                );
            }
            if let Some(o) = &p.operation
                && !operations.contains(&o.as_str())
            {
                out.push(
                    inputs
                        .policy_error(at, format!("rule `{text}` names undeclared operation `{o}`"))
                        .help(did_you_mean(o, operations.iter().copied())),
                );
            }
        }
    }
}

//! The tier x tool decision matrix as Markdown, for reviewers (docs/policy-matrix.md).

use std::fmt::Write as _;

use crate::rules::Checked;

pub fn markdown(checked: &Checked) -> String {
    let tiers: Vec<&str> = checked.policy.model.tiers.iter().map(|t| t.name.as_str()).collect();
    let mut out = String::from(
        "# Policy matrix\n\n\
         Generated from `tools.yaml` and `policy.yaml`; do not edit. For every tool and tier:\n\
         `allow` (runs), `confirm` (runs once the client's own user confirms), `approval` (runs\n\
         after another person approves) or `deny` (hidden from that tier's `tools/list` and\n\
         refused). A token whose tier is not listed here is denied everything.\n\n",
    );
    let _ = writeln!(out, "| tool | securable:operation | class | {} |", tiers.join(" | "));
    let _ = writeln!(out, "|---|---|---|{}", "---|".repeat(tiers.len()));
    for (tool, plan) in checked.tools.model.tools.iter().zip(&checked.plans) {
        let cells: Vec<&str> = plan.decisions.iter().map(|d| d.label()).collect();
        let _ = writeln!(
            out,
            "| `{}` | {}:{} | {} | {} |",
            tool.name,
            tool.securable,
            tool.operation,
            plan.class.label(),
            cells.join(" | ")
        );
    }
    out
}

/// What a role held fleet-wide, or on a management group, lets a tier's token do with each
/// tool (docs/policy-roles.md). A test asks the gate itself for every cell and compares.
pub fn roles_markdown(checked: &Checked) -> String {
    use toolgate_catalogue::model::Authorization;
    use toolgate_catalogue::policy::{Decision, Pattern};
    let policy = &checked.policy.model;
    let mut out = String::from(
        "# Decisions by role\n\n\
         Generated from `tools.yaml` and `policy.yaml`; do not edit. For every role, held fleet-wide\n\
         or on a management group, every tool and tier: the tier's decision (`allow`, `confirm`,\n\
         `approval`) when the role grants the call, `deny` when the tier refuses the pair, and `-`\n\
         when the tier allows it but the role does not grant it there. A grant on a group covers\n\
         that group's agents only (docs/groups.md); `fleet_only` securables and the\n\
         `durableAdministrator` and `fleetWide` tools are never granted on a group, and `fleetOrGroupOwner` tools\n\
         on a group only to its owner role.\n",
    );
    let tiers: Vec<&str> = policy.tiers.iter().map(|t| t.name.as_str()).collect();
    for role in &policy.roles {
        let grants: Vec<Pattern<String>> = toolgate_catalogue::policy::role_grants(policy, role)
            .into_iter()
            .filter_map(|g| Pattern::parse(g).ok())
            .collect();
        let _ = writeln!(out, "\n## {}\n", role.name);
        let columns: Vec<String> = tiers.iter().flat_map(|t| [format!("{t} fleet"), format!("{t} group")]).collect();
        let _ = writeln!(out, "| tool | {} |", columns.join(" | "));
        let _ = writeln!(out, "|---|{}", "---|".repeat(columns.len()));
        for (tool, plan) in checked.tools.model.tools.iter().zip(&checked.plans) {
            let permits = grants.iter().any(|g| g.matches(&tool.securable, &tool.operation));
            let (fleet, group) = match tool.authorization {
                Authorization::Permission => (permits, permits && !policy.fleet_only.contains(&tool.securable)),
                Authorization::DurableAdministrator => {
                    (policy.server.rbac_administrator_role.as_deref() == Some(role.name.as_str()), false)
                }
                Authorization::FleetWide => (permits, false),
                Authorization::FleetOrGroupOwner => {
                    let owner = policy.server.group_owner_role.as_deref() == Some(role.name.as_str());
                    (permits, permits && owner && !policy.fleet_only.contains(&tool.securable))
                }
            };
            let cell = |decision: Decision, granted: bool| match (decision, granted) {
                (Decision::Deny, _) => "deny",
                (_, false) => "-",
                (d, true) => d.label(),
            };
            let cells: Vec<&str> = plan.decisions.iter().flat_map(|d| [cell(*d, fleet), cell(*d, group)]).collect();
            let _ = writeln!(out, "| `{}` | {} |", tool.name, cells.join(" | "));
        }
    }
    out
}

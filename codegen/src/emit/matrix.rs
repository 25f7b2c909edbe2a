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

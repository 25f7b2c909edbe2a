//! `toolgate explain toolsets` and `toolgate explain <toolset>`: what a client can choose to
//! see (docs/toolsets.md), from the checked catalogue.

use std::fmt::Write as _;

use toolgate_catalogue::Checked;

/// The page for `name`, when it is `toolsets` or a toolset's name.
pub fn explain(name: &str, checked: &Checked) -> Option<String> {
    let toolsets = &checked.tools.model.toolsets;
    let tiers = &checked.policy.model.tiers;
    let defaulting = |set: &str| -> Vec<&str> {
        tiers
            .iter()
            .filter(|t| t.toolsets.is_empty() || t.toolsets.iter().any(|s| s == set))
            .map(|t| t.name.as_str())
            .collect()
    };
    let mut out = String::new();
    if name == "toolsets" {
        let _ =
            writeln!(out, "toolsets (a client chooses with X-MCP-Toolsets or /mcp/x/{{toolsets}}; docs/toolsets.md)");
        for set in toolsets {
            let count = checked.tools.model.tools.iter().filter(|t| t.toolset.as_deref() == Some(&set.name)).count();
            let core = if set.core { ", core: in every choice" } else { "" };
            let _ = writeln!(out, "  {:<14} {count:>2} tools{core} — {}", set.name, set.description);
        }
        for tier in tiers {
            let chosen = if tier.toolsets.is_empty() { "every toolset".to_string() } else { tier.toolsets.join(", ") };
            let _ = writeln!(out, "  tier {:<10} shows by default: {chosen}", tier.name);
        }
        return Some(out);
    }
    let set = toolsets.iter().find(|t| t.name == name)?;
    let _ = writeln!(out, "{} — {} (toolset)", set.name, set.title);
    let _ = writeln!(out, "  {}", set.description);
    match set.core {
        true => {
            let _ = writeln!(out, "  core        listed in every choice, `dynamic` included");
        }
        false => {
            let tiers = defaulting(&set.name);
            let tiers = if tiers.is_empty() { "no tier".to_string() } else { tiers.join(", ") };
            let _ = writeln!(out, "  default of  {tiers}");
        }
    }
    let _ = writeln!(out, "  tools");
    for (tool, plan) in checked.tools.model.tools.iter().zip(&checked.plans) {
        if tool.toolset.as_deref() == Some(name) {
            let _ =
                writeln!(out, "    {:<32} {}:{} ({})", tool.name, tool.securable, tool.operation, plan.class.label());
        }
    }
    Some(out)
}

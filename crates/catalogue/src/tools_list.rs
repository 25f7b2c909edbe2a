//! The `tools` array each tier is served, as compact JSON bytes computed once, at build time.

use serde_json::{Map, Value, json};

use crate::check::{Checked, ToolPlan};
use crate::model::Tool;
use crate::policy::Decision;

/// One tool as `tools/list` describes it.
pub fn tool_json(checked: &Checked, index: usize) -> Value {
    entry(&checked.tools.model.tools[index], &checked.plans[index])
}

/// A tool's entry in `tools/list`, from its YAML and its plan.
pub fn entry(tool: &Tool, plan: &ToolPlan) -> Value {
    let a = tool.annotations;
    let mut out = Map::new();
    out.insert("name".into(), json!(tool.name));
    out.insert("title".into(), json!(tool.title));
    out.insert("description".into(), json!(tool.description));
    out.insert("inputSchema".into(), Value::Object(plan.published_input_schema.clone()));
    if let Some(output) = &tool.output_schema {
        out.insert("outputSchema".into(), Value::Object(output.clone()));
    }
    out.insert(
        "annotations".into(),
        json!({
            // `annotations.title` is where 2025-03-26 clients look for the display name.
            "title": tool.title,
            "readOnlyHint": a.readOnlyHint,
            "destructiveHint": a.destructiveHint,
            "idempotentHint": a.idempotentHint,
            "openWorldHint": a.openWorldHint,
        }),
    );
    Value::Object(out)
}

fn array(checked: &Checked, keep: impl Fn(usize) -> bool) -> String {
    let tools: Vec<Value> = (0..checked.plans.len()).filter(|&i| keep(i)).map(|i| tool_json(checked, i)).collect();
    serde_json::to_string(&tools).expect("JSON values serialize")
}

/// (tier name, the tools array that tier sees): every tool it may call, with or without approval.
pub fn per_tier(checked: &Checked) -> Vec<(String, String)> {
    checked
        .policy
        .model
        .tiers
        .iter()
        .enumerate()
        .map(|(t, tier)| (tier.name.clone(), array(checked, |i| checked.plans[i].decisions[t] != Decision::Deny)))
        .collect()
}

/// The whole catalogue, for `--list-all-tools`.
pub fn full(checked: &Checked) -> String {
    array(checked, |_| true)
}

/// Which of a tier's tools a list holds (docs/toolsets.md), for the snapshots and the figures;
/// the server assembles the same bytes from the same entries for any choice.
#[derive(Clone, Copy, Debug)]
pub enum Chosen {
    /// The tier's default toolsets (policy.yaml `tiers[].toolsets`) and the core ones.
    Default,
    /// Only the core toolsets.
    Dynamic,
}

/// The core toolsets, as a bit set over tools.yaml's order.
fn core_mask(checked: &Checked) -> u64 {
    checked.tools.model.toolsets.iter().enumerate().filter(|(_, t)| t.core).fold(0, |m, (i, _)| m | 1 << i)
}

/// Each tier's default toolsets as a bit set: those it names and the core ones, or every one
/// when it names none.
pub fn tier_defaults(checked: &Checked) -> Vec<u64> {
    let declared = &checked.tools.model.toolsets;
    let index = |name: &str| declared.iter().position(|t| t.name == name).expect("checked: declared");
    checked
        .policy
        .model
        .tiers
        .iter()
        .map(|tier| match tier.toolsets.is_empty() {
            true => u64::MAX,
            false => tier.toolsets.iter().fold(core_mask(checked), |m, name| m | 1 << index(name)),
        })
        .collect()
}

/// (tier name, the tools array of that choice at that tier).
pub fn per_tier_chosen(checked: &Checked, chosen: Chosen) -> Vec<(String, String)> {
    let defaults = tier_defaults(checked);
    let declared = &checked.tools.model.toolsets;
    let in_mask = |i: usize, mask: u64| match &checked.tools.model.tools[i].toolset {
        None => true,
        Some(name) => declared.iter().position(|t| &t.name == name).is_some_and(|k| mask & (1 << k) != 0),
    };
    let tiers = checked.policy.model.tiers.iter().enumerate();
    tiers
        .map(|(t, tier)| {
            let mask = match chosen {
                Chosen::Default => defaults[t],
                Chosen::Dynamic => core_mask(checked),
            };
            (tier.name.clone(), array(checked, |i| checked.plans[i].decisions[t] != Decision::Deny && in_mask(i, mask)))
        })
        .collect()
}

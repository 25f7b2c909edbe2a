//! The `tools` array each tier is served, as compact JSON bytes computed once, at build time.

use serde_json::{Map, Value, json};

use crate::check::Checked;
use crate::policy::Decision;

/// One tool as `tools/list` describes it.
pub fn tool_json(checked: &Checked, index: usize) -> Value {
    let tool = &checked.tools.model.tools[index];
    let plan = &checked.plans[index];
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

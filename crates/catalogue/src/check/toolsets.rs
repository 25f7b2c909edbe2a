//! Rule 20: toolsets and what a tool costs a client's context (docs/toolsets.md).
//! - Toolsets have unique names of `[a-z0-9_]`, none of the choices' own words, and each holds
//!   at least one tool; once any is declared, every tool names exactly one that exists.
//! - A tier's default toolsets (policy.yaml `tiers[].toolsets`) exist.
//! - Each tool's entry in `tools/list` (name, title, description, both schemas, annotations)
//!   stays within [`WARN_TOOL_BYTES`] (a warning) and [`MAX_TOOL_BYTES`] (an error): every
//!   client pays for it on every turn. No schema carries an enum longer than [`MAX_ENUM_VALUES`]:
//!   a list of names the server checks anyway belongs in the handler's error, with the closest.

use serde_json::Value;

use super::{Inputs, ToolPlan};
use crate::diag::{Diagnostic, did_you_mean};

/// The words a client's choice uses besides toolset names.
pub const RESERVED: &[&str] = &["all", "default", "dynamic"];
/// A tool's `tools/list` entry above this many bytes is a warning.
pub const WARN_TOOL_BYTES: usize = 4096;
/// And above this many, an error.
pub const MAX_TOOL_BYTES: usize = 8192;
/// How many toolsets a catalogue may declare (a choice is a 64-bit set).
pub const MAX_TOOLSETS: usize = 64;
/// The longest enum a schema may carry.
pub const MAX_ENUM_VALUES: usize = 24;

fn valid(name: &str) -> bool {
    (1..=32).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

pub fn check(inputs: &Inputs) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let catalogue = &inputs.tools.model;
    let file = &inputs.tools.file.name;
    let names: Vec<&str> = catalogue.toolsets.iter().map(|t| t.name.as_str()).collect();
    if names.len() > MAX_TOOLSETS {
        let at = inputs.tools.map.key("/toolsets");
        let message = format!("{} toolsets are declared; at most {MAX_TOOLSETS}", names.len());
        out.push(Diagnostic::error(file, at, message).help("merge some: a client chooses among a few"));
    }
    for (k, set) in catalogue.toolsets.iter().enumerate() {
        let at = inputs.tools.map.value(&format!("/toolsets/{k}/name"));
        if !valid(&set.name) {
            out.push(Diagnostic::error(
                file,
                at,
                format!("toolset name {:?} must be 1-32 characters of a-z 0-9 _", set.name),
            ));
        } else if RESERVED.contains(&set.name.as_str()) {
            out.push(
                Diagnostic::error(file, at, format!("`{}` is a choice of its own, not a toolset name", set.name))
                    .help(format!("choose another name: {} are reserved", RESERVED.join(", "))),
            );
        }
        if names[..k].contains(&set.name.as_str()) {
            out.push(Diagnostic::error(file, at, format!("duplicate toolset `{}`", set.name)));
        }
        if !catalogue.tools.iter().any(|t| t.toolset.as_deref() == Some(set.name.as_str())) {
            out.push(
                Diagnostic::error(file, at, format!("toolset `{}` holds no tool", set.name))
                    .help("put a tool in it (`toolset:` on the tool), or remove it"),
            );
        }
    }
    for (i, tool) in catalogue.tools.iter().enumerate() {
        match (&tool.toolset, names.is_empty()) {
            (None, false) => out.push(
                inputs
                    .tool_error(i, "", "missing `toolset`: every tool is in exactly one")
                    .help(format!("add `toolset: <name>`, one of {}", names.join(", "))),
            ),
            (Some(set), _) if !names.contains(&set.as_str()) => {
                let help = match names.is_empty() {
                    true => "declare it under `toolsets:` at the top of tools.yaml".to_string(),
                    false => did_you_mean(set, names.iter().copied()),
                };
                out.push(inputs.tool_error(i, "/toolset", format!("unknown toolset `{set}`")).help(help));
            }
            _ => {}
        }
    }
    for (t, tier) in inputs.policy.model.tiers.iter().enumerate() {
        for (k, set) in tier.toolsets.iter().enumerate() {
            if !names.contains(&set.as_str()) {
                let message =
                    format!("tier `{}`: unknown toolset `{set}` (tools.yaml declares the toolsets)", tier.name);
                let help = if names.is_empty() {
                    "tools.yaml declares none".into()
                } else {
                    did_you_mean(set, names.iter().copied())
                };
                out.push(inputs.policy_error(&format!("/tiers/{t}/toolsets/{k}"), message).help(help));
            }
        }
    }
    out
}

/// The budget and the enums, on the schemas as served.
pub fn budget(inputs: &Inputs, plans: &[ToolPlan]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        let tool = inputs.tool(i);
        let bytes = crate::tools_list::entry(tool, plan).to_string().len();
        let why = format!(
            "its tools/list entry is {bytes} bytes (description {}, inputSchema {}, outputSchema {})",
            tool.description.len(),
            Value::Object(plan.published_input_schema.clone()).to_string().len(),
            tool.output_schema.as_ref().map_or(0, |o| Value::Object(o.clone()).to_string().len()),
        );
        let help = "shorten the description and the schemas' descriptions; say once, in the tool's description, what every field shares";
        if bytes > MAX_TOOL_BYTES {
            out.push(inputs.tool_error(i, "", format!("{why}, above the limit of {MAX_TOOL_BYTES}")).help(help));
        } else if bytes > WARN_TOOL_BYTES {
            out.push(inputs.tool_warning(i, "", format!("{why}, above the budget of {WARN_TOOL_BYTES}")).help(help));
        }
        for (side, schema) in [("inputSchema", Some(&tool.input_schema)), ("outputSchema", tool.output_schema.as_ref())]
        {
            if let Some(schema) = schema {
                long_enums(&Value::Object(schema.clone()), side, &mut |path, n| {
                    out.push(
                        inputs
                            .tool_error(
                                i,
                                &format!("/{side}"),
                                format!("{path} is an enum of {n} values (at most {MAX_ENUM_VALUES})"),
                            )
                            .help(
                                "take a string, check it in the handler, and answer a wrong one with the closest names",
                            ),
                    )
                });
            }
        }
    }
    out
}

fn long_enums(schema: &Value, path: &str, found: &mut impl FnMut(String, usize)) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::Array(values)) = map.get("enum")
                && values.len() > MAX_ENUM_VALUES
            {
                found(path.to_string(), values.len());
            }
            for (key, value) in map {
                if !matches!(key.as_str(), "enum" | "const" | "default" | "examples") {
                    long_enums(value, &format!("{path}/{key}"), found);
                }
            }
        }
        Value::Array(items) => {
            for (k, value) in items.iter().enumerate() {
                long_enums(value, &format!("{path}/{k}"), found);
            }
        }
        _ => {}
    }
}

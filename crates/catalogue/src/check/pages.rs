//! `pages: <array>`: a listing tool's answer is cut into pages that fit a model's context.
//! Every listing tool pages the same way, so the arguments and answer fields that do it are
//! derived here rather than written into each tool: the `cursor` argument, and the answer's
//! `next_cursor` and `remaining`. The build checks the named array exists and that the tool
//! does not declare the derived names itself.

use serde_json::{Map, Value, json};

use super::Inputs;
use crate::diag::Diagnostic;
use crate::model::Tool;

/// The argument that carries the previous page's `next_cursor`.
pub const CURSOR: &str = "cursor";
/// The answer's handle on the next page (null after the last).
pub const NEXT_CURSOR: &str = "next_cursor";
/// The answer's count of rows after this page.
pub const REMAINING: &str = "remaining";

/// Problems with `pages`; each tool whose `pages` has none is expanded by [`expand`].
pub fn check(inputs: &Inputs) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (i, tool) in inputs.tools.model.tools.iter().enumerate() {
        let Some(field) = &tool.pages else { continue };
        let arrays = array_properties(tool);
        if !arrays.contains(&field.as_str()) {
            let help = match arrays.is_empty() {
                true => {
                    "the outputSchema has no array property at its root: a tool without one has nothing to page".into()
                }
                false => format!("one of: {}", arrays.join(", ")),
            };
            out.push(
                inputs
                    .tool_error(i, "/pages", format!("`pages: {field}` is not an array property of the outputSchema"))
                    .help(help),
            );
        }
        for name in ["offset", "limit"] {
            let declared = tool.input_schema.get("properties").and_then(|p| p.get(name));
            if declared.is_some_and(|schema| schema.get("type") != Some(&json!("integer"))) {
                out.push(
                    inputs
                        .tool_error(
                            i,
                            &format!("/inputSchema/properties/{name}"),
                            format!("`{name}` of a tool that pages is not an integer"),
                        )
                        .help(format!(
                            "declare it `{name}: {{type: integer, minimum: {}}}`",
                            if name == "offset" { 0 } else { 1 }
                        )),
                );
            }
        }
        for (schema, sub, name) in [
            (Some(&tool.input_schema), "/inputSchema/properties", CURSOR),
            (tool.output_schema.as_ref(), "/outputSchema/properties", NEXT_CURSOR),
            (tool.output_schema.as_ref(), "/outputSchema/properties", REMAINING),
        ] {
            if schema.and_then(|s| s.get("properties")).and_then(|p| p.get(name)).is_some() {
                out.push(
                    inputs
                        .tool_error(i, &format!("{sub}/{name}"), format!("`{name}` is derived from `pages`"))
                        .help("remove it: the build adds it, the same for every tool that pages"),
                );
            }
        }
    }
    out
}

fn array_properties(tool: &Tool) -> Vec<&str> {
    let properties = tool.output_schema.as_ref().and_then(|s| s.get("properties")).and_then(Value::as_object);
    properties
        .into_iter()
        .flatten()
        .filter(|(_, schema)| schema.get("type") == Some(&json!("array")))
        .map(|(name, _)| name.as_str())
        .collect()
}

/// Adds the derived argument and answer fields to every tool that pages (run after [`check`]
/// found nothing wrong, so each named array exists).
pub fn expand(tools: &mut [Tool]) {
    for tool in tools.iter_mut() {
        let Some(field) = tool.pages.clone() else { continue };
        insert(
            &mut tool.input_schema,
            CURSOR,
            json!({
                "type": "string", "minLength": 1, "maxLength": 512,
                "description": "The previous answer's next_cursor, with the same other arguments; none for the first page.",
            }),
            false,
        );
        let Some(output) = tool.output_schema.as_mut() else { continue };
        insert(
            output,
            NEXT_CURSOR,
            json!({
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "description": format!("Pass as `cursor` for the {field} after this page; null after the last."),
            }),
            true,
        );
        insert(
            output,
            REMAINING,
            json!({
                "type": "integer", "minimum": 0,
                "description": format!("How many more {field} match after this page."),
            }),
            true,
        );
    }
}

fn insert(schema: &mut Map<String, Value>, name: &str, property: Value, required: bool) {
    if let Some(properties) = schema.entry("properties").or_insert_with(|| json!({})).as_object_mut() {
        properties.insert(name.to_string(), property);
    }
    if required && let Some(list) = schema.entry("required").or_insert_with(|| json!([])).as_array_mut() {
        list.push(json!(name));
    }
}

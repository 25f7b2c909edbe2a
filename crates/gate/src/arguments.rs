//! The tools' schemas, compiled once at start: arguments are checked against the inputSchema
//! (strictly: `1.0` is not an integer) before any approval work; in debug builds results are
//! checked against the outputSchema.

use std::sync::Arc;

use serde_json::Value;
use toolgate_domain::catalogue::{Catalogue, ToolMeta};
use toolgate_domain::denial::{ArgumentHints, ArgumentProblem, Denial, InvalidArguments};
use toolgate_domain::redact::{is_sensitive, truncated};

/// An invalid-arguments reply names at most this many problems, each at most this long, so
/// a 3 MiB argument cannot make a 6 MB reply.
const MAX_PROBLEMS: usize = 20;
const MAX_PROBLEM_BYTES: usize = 300;

#[derive(Debug, thiserror::Error)]
#[error("{what} of {tool} does not compile: {why}")]
pub struct SchemaError {
    what: &'static str,
    tool: &'static str,
    why: String,
}

/// One compiled validator per tool, in catalogue order, and the parsed inputSchema.
pub struct Schemas {
    input: Vec<jsonschema::Validator>,
    input_json: Vec<Value>,
    output: Vec<Option<jsonschema::Validator>>,
    required_capabilities: Vec<Option<Value>>,
    /// Per tool, its `required` list, a minimal valid call and the remediation built from
    /// them, for invalid-arguments replies.
    hints: Vec<Arc<ArgumentHints>>,
}

fn compile(
    schema: &str,
    what: &'static str,
    tool: &'static str,
) -> Result<(jsonschema::Validator, Value), SchemaError> {
    let error = |why: String| SchemaError { what, tool, why };
    let value: Value = serde_json::from_str(schema).map_err(|e| error(e.to_string()))?;
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(&value)
        .map_err(|e| error(e.to_string()))?;
    Ok((validator, value))
}

impl Schemas {
    pub fn compile(catalogue: &'static Catalogue) -> Result<Self, SchemaError> {
        let mut schemas = Schemas {
            input: Vec::new(),
            input_json: Vec::new(),
            output: Vec::new(),
            required_capabilities: Vec::new(),
            hints: Vec::new(),
        };
        for meta in catalogue.tools {
            let (validator, json) = compile(meta.input_schema, "inputSchema", meta.name)?;
            schemas.input.push(validator);
            let required = json.get("required").cloned().unwrap_or(Value::Array(Vec::new()));
            schemas.input_json.push(json);
            let example = meta.example_arguments.map(serde_json::from_str).transpose();
            let example = example.map_err(|e| SchemaError { what: "example", tool: meta.name, why: e.to_string() })?;
            schemas.hints.push(Arc::new(ArgumentHints::new(required, example)));
            let output = meta.output_schema.map(|s| compile(s, "outputSchema", meta.name)).transpose()?;
            schemas.output.push(output.map(|(v, _)| v));
            let capabilities = meta
                .required_client_capabilities
                .map(serde_json::from_str)
                .transpose()
                .map_err(|e| SchemaError { what: "requiredClientCapabilities", tool: meta.name, why: e.to_string() })?;
            schemas.required_capabilities.push(capabilities);
        }
        Ok(schemas)
    }

    /// The published inputSchema, parsed.
    pub fn input_schema(&self, tool: &ToolMeta) -> &Value {
        &self.input_json[tool.index]
    }

    /// The client capabilities a call of `tool` needs.
    pub fn required_capabilities(&self, tool: &ToolMeta) -> Option<&Value> {
        self.required_capabilities[tool.index].as_ref()
    }

    pub fn check(&self, tool: &'static ToolMeta, arguments: &Value) -> Result<(), Denial> {
        let mut problems: Vec<ArgumentProblem> = self.input[tool.index]
            .iter_errors(arguments)
            .map(|e| ArgumentProblem { pointer: e.instance_path().as_str().to_string(), message: e.to_string() })
            .collect();
        non_integers(self.input_schema(tool), arguments, &mut String::new(), &mut problems);
        if problems.is_empty() {
            return Ok(());
        }
        // The validator's messages quote the value: never a sensitive one, never a huge one.
        for problem in &mut problems {
            problem.message = if is_sensitive(&problem.pointer, tool.sensitive_arguments) {
                format!("the value does not satisfy the schema (not shown: `{}` is sensitive)", problem.pointer)
            } else {
                truncated(&problem.message, MAX_PROBLEM_BYTES)
            };
        }
        problems.truncate(MAX_PROBLEMS);
        let hints = self.hints[tool.index].clone();
        Err(Denial::InvalidArguments(InvalidArguments { tool: tool.name, problems, hints }))
    }

    /// The invalid-arguments denial for problems found beyond the schema (see [`crate::ArgumentCheck`]).
    pub fn refuse(&self, tool: &ToolMeta, mut problems: Vec<ArgumentProblem>) -> Denial {
        for problem in &mut problems {
            problem.message = truncated(&problem.message, MAX_PROBLEM_BYTES);
        }
        problems.truncate(MAX_PROBLEMS);
        let hints = self.hints[tool.index].clone();
        Denial::InvalidArguments(InvalidArguments { tool: tool.name, problems, hints })
    }

    /// Where a handler's result breaks the tool's outputSchema (a bug in the handler).
    pub fn output_problem(&self, tool: &ToolMeta, value: &Value) -> Option<String> {
        let validator = self.output[tool.index].as_ref()?;
        let e = validator.iter_errors(value).next()?;
        Some(format!("{} returned a result that breaks its outputSchema at {}: {e}", tool.name, e.instance_path()))
    }
}

/// JSON Schema counts 1.0 as an integer; toolgate does not (no silent truncation). Every
/// call's arguments pass here: the JSON pointer is one buffer, grown and cut back as the walk
/// goes, so nothing is allocated unless a problem is found.
fn non_integers(schema: &Value, value: &Value, pointer: &mut String, out: &mut Vec<ArgumentProblem>) {
    if schema.get("type").and_then(Value::as_str) == Some("integer") && value.as_number().is_some_and(|n| n.is_f64()) {
        out.push(ArgumentProblem {
            pointer: pointer.clone(),
            message: format!("{value} is not an integer (write it without a fraction or exponent)"),
        });
    }
    let depth = pointer.len();
    match value {
        Value::Object(obj) => {
            let Some(properties) = schema.get("properties") else { return };
            for (k, v) in obj {
                if let Some(s) = properties.get(k) {
                    pointer.push('/');
                    for c in k.chars() {
                        match c {
                            '~' => pointer.push_str("~0"),
                            '/' => pointer.push_str("~1"),
                            c => pointer.push(c),
                        }
                    }
                    non_integers(s, v, pointer, out);
                    pointer.truncate(depth);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    use std::fmt::Write as _;
                    let _ = write!(pointer, "/{i}");
                    non_integers(s, v, pointer, out);
                    pointer.truncate(depth);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn non_integers_are_named_by_escaped_json_pointers() {
        let schema = json!({"type": "object", "properties": {
            "a/b": {"type": "object", "properties": {"m~n": {"type": "integer"}}},
            "list": {"type": "array", "items": {"type": "integer"}},
            "fine": {"type": "integer"},
        }});
        let value = json!({"a/b": {"m~n": 1.0}, "list": [1, 2.5], "fine": 3});
        let mut out = Vec::new();
        non_integers(&schema, &value, &mut String::new(), &mut out);
        let pointers: Vec<&str> = out.iter().map(|p| p.pointer.as_str()).collect();
        assert_eq!(pointers, vec!["/a~1b/m~0n", "/list/1"]);
    }
}

//! The tools' schemas: arguments are checked against the inputSchema (strictly: `1.0` is not
//! an integer) before any approval work; in debug builds results are checked against the
//! outputSchema.
//!
//! A tool's validators are compiled on its first use, not at start: a server that is never
//! asked to call most of its tools never holds their validators, nor touches the compiler's
//! code (both are most of what a large catalogue adds to idle memory and start time). The
//! build already compiled every schema with [`options`] (`toolgate check` does the same), so
//! a schema that fails here is a bug, answered as an internal error, never a panic.

use std::sync::{Arc, OnceLock};

use serde_json::Value;
use toolgate_domain::catalogue::{Catalogue, ToolMeta};
use toolgate_domain::denial::{ArgumentHints, ArgumentProblem, Denial, InvalidArguments};
use toolgate_domain::redact::{is_sensitive, truncated_owned};

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

/// A validator compiled on first use, or why it did not compile.
type Compiled = OnceLock<Result<jsonschema::Validator, String>>;

/// Per tool, in catalogue order: the parsed inputSchema and its validators once compiled.
pub struct Schemas {
    catalogue: &'static Catalogue,
    input: Box<[Compiled]>,
    input_json: Vec<Value>,
    output: Box<[Compiled]>,
    required_capabilities: Vec<Option<Value>>,
    /// Per tool, its `required` list, a minimal valid call and the remediation built from
    /// them, for invalid-arguments replies.
    hints: Vec<Arc<ArgumentHints>>,
}

/// How every schema is compiled, here and by the build's check (keep them alike).
pub fn options() -> jsonschema::ValidationOptions<'static> {
    jsonschema::options().with_draft(jsonschema::Draft::Draft202012).should_validate_formats(true)
}

fn build(schema: &Value) -> Result<jsonschema::Validator, String> {
    options().build(schema).map_err(|e| e.to_string())
}

/// The validator in `slot`, compiled by `compile` on first use.
fn compiled(
    slot: &Compiled,
    compile: impl FnOnce() -> Result<jsonschema::Validator, String>,
) -> Result<&jsonschema::Validator, String> {
    slot.get_or_init(compile).as_ref().map_err(String::clone)
}

impl Schemas {
    /// Parses every tool's schemas (their validators wait for first use).
    pub fn compile(catalogue: &'static Catalogue) -> Result<Self, SchemaError> {
        let tools = catalogue.tools.len();
        let mut schemas = Schemas {
            catalogue,
            input: (0..tools).map(|_| OnceLock::new()).collect(),
            input_json: Vec::with_capacity(tools),
            output: (0..tools).map(|_| OnceLock::new()).collect(),
            required_capabilities: Vec::with_capacity(tools),
            hints: Vec::with_capacity(tools),
        };
        for meta in catalogue.tools {
            let json: Value = serde_json::from_str(meta.input_schema).map_err(|e| SchemaError {
                what: "inputSchema",
                tool: meta.name,
                why: e.to_string(),
            })?;
            let required = json.get("required").cloned().unwrap_or(Value::Array(Vec::new()));
            schemas.input_json.push(json);
            let example = meta.example_arguments.map(serde_json::from_str).transpose();
            let example = example.map_err(|e| SchemaError { what: "example", tool: meta.name, why: e.to_string() })?;
            schemas.hints.push(Arc::new(ArgumentHints::new(required, example)));
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

    /// Compiles every validator now, as a first use would; the first fault found.
    pub fn compile_all(&self) -> Result<(), SchemaError> {
        for meta in self.catalogue.tools {
            self.input_validator(meta).map_err(|why| SchemaError { what: "inputSchema", tool: meta.name, why })?;
            self.output_validator(meta).transpose().map_err(|why| SchemaError {
                what: "outputSchema",
                tool: meta.name,
                why,
            })?;
        }
        Ok(())
    }

    fn input_validator(&self, tool: &ToolMeta) -> Result<&jsonschema::Validator, String> {
        compiled(&self.input[tool.index], || build(&self.input_json[tool.index]))
    }

    fn output_validator(&self, tool: &ToolMeta) -> Option<Result<&jsonschema::Validator, String>> {
        let schema = tool.output_schema?;
        let parse_and_build = || build(&serde_json::from_str(schema).map_err(|e| e.to_string())?);
        Some(compiled(&self.output[tool.index], parse_and_build))
    }

    pub fn check(&self, tool: &'static ToolMeta, arguments: &Value) -> Result<(), Denial> {
        let validator = self.input_validator(tool).map_err(|why| Denial::SchemaFault { tool: tool.name, why })?;
        // Most calls are valid: `is_valid` builds no error and tracks no location, and a walk
        // for fractions finds nothing to check against the schema's integers.
        if validator.is_valid(arguments) && !has_fraction(arguments) {
            return Ok(());
        }
        let mut problems: Vec<ArgumentProblem> = validator
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
                truncated_owned(std::mem::take(&mut problem.message), MAX_PROBLEM_BYTES)
            };
        }
        problems.truncate(MAX_PROBLEMS);
        let hints = self.hints[tool.index].clone();
        Err(Denial::InvalidArguments(InvalidArguments { tool: tool.name, problems, hints }))
    }

    /// The invalid-arguments denial for problems found beyond the schema (see [`crate::ArgumentCheck`]).
    pub fn refuse(&self, tool: &ToolMeta, mut problems: Vec<ArgumentProblem>) -> Denial {
        for problem in &mut problems {
            problem.message = truncated_owned(std::mem::take(&mut problem.message), MAX_PROBLEM_BYTES);
        }
        problems.truncate(MAX_PROBLEMS);
        let hints = self.hints[tool.index].clone();
        Denial::InvalidArguments(InvalidArguments { tool: tool.name, problems, hints })
    }

    /// Where a handler's result breaks the tool's outputSchema (a bug in the handler).
    pub fn output_problem(&self, tool: &ToolMeta, value: &Value) -> Option<String> {
        let validator = match self.output_validator(tool)? {
            Ok(validator) => validator,
            Err(why) => return Some(format!("the outputSchema of {} does not compile: {why}", tool.name)),
        };
        let e = validator.iter_errors(value).next()?;
        Some(format!("{} returned a result that breaks its outputSchema at {}: {e}", tool.name, e.instance_path()))
    }
}

/// Whether any number in `value` is written with a fraction or an exponent (the only
/// numbers [`non_integers`] may refuse).
fn has_fraction(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.is_f64(),
        Value::Array(items) => items.iter().any(has_fraction),
        Value::Object(members) => members.values().any(has_fraction),
        _ => false,
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
    use toolgate_domain::catalogue::{Annotations, TaskSupport};
    use toolgate_policy::{OperationClass, Permission};

    use super::*;

    /// A tool whose inputSchema parses but does not compile (a regex with an open group): what
    /// the build's check refuses, should a binary ever carry one.
    static BROKEN: [ToolMeta; 1] = [ToolMeta {
        index: 0,
        name: "broken_tool",
        title: "",
        description: "",
        securable: "Tag",
        operation: "Read",
        class: OperationClass::Read,
        annotations: Annotations { read_only: true, destructive: false, idempotent: true, open_world: false },
        hint_override: None,
        handler: "builtin::echo",
        input_schema: r#"{"type":"object","properties":{"name":{"type":"string","pattern":"("}}}"#,
        output_schema: None,
        required_client_capabilities: None,
        task_support: TaskSupport::Forbidden,
        example_arguments: None,
        static_result: None,
        approval_gated: false,
        decisions: &[],
        sensitive_arguments: &[],
        agent_data: false,
        pages: None,
        plan_argument: None,
        aliases: &[],
        toolset: None,
        keywords: &[],
        store_fault_retry_ms: 5_000,
        authorization: toolgate_domain::catalogue::Authorization::Permission,
        precondition: None,
    }];
    static CATALOGUE: Catalogue = Catalogue {
        tools: &BROKEN,
        prompts: &[],
        resources: &[],
        templates: &[],
        tiers: &[],
        roles: &[],
        securables: &[],
        operations: &[],
        reviewer: Permission { securable: "Approval", operation: "Review" },
        principal_admin: Permission { securable: "Principal", operation: "Admin" },
        fleet_only: &[],
        group_owner_role: None,
        rbac_administrator_role: None,
        engines: toolgate_domain::engines::EngineRules {
            human_only_roles: &[],
            administrator_permissions: &[],
            quota: toolgate_domain::engines::EngineQuota { requests_per_minute: 1, concurrent_requests: 1 },
            credential_tier: None,
        },
        close_reviews_with_undecided: false,
        toolsets: &[],
        tier_toolsets: &[],
    };

    #[test]
    fn a_schema_that_does_not_compile_is_a_fault_on_first_use_never_a_panic() {
        let schemas = Schemas::compile(&CATALOGUE).expect("the schema parses: compiling waits for first use");
        let tool = &CATALOGUE.tools[0];
        for _ in 0..2 {
            match schemas.check(tool, &json!({"name": "x"})) {
                Err(Denial::SchemaFault { tool, why }) => {
                    assert_eq!(tool, "broken_tool");
                    assert!(why.contains('('), "the fault says what failed: {why}");
                }
                other => panic!("expected a schema fault, got {other:?}"),
            }
        }
        let error = schemas.compile_all().expect_err("compile_all finds it").to_string();
        assert!(error.starts_with("inputSchema of broken_tool does not compile"), "{error}");
    }

    #[test]
    fn only_fractions_send_valid_arguments_to_the_integer_walk() {
        assert!(!has_fraction(&json!({"a": [1, -2, {"b": 3}], "s": "1.5", "n": null})));
        assert!(has_fraction(&json!({"a": [1, {"b": 3.0}]})));
        assert!(has_fraction(&json!([1e3])));
    }

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

//! Rules 5 and 6: argument and output schemas are valid JSON Schema 2020-12 that every client
//! can read, and approval-gated tools publish `approval_id` without authors writing it.

use serde_json::{Map, Value, json};

use super::{Inputs, ToolPlan};
use crate::args::{self, RustType};
use crate::diag::Diagnostic;

/// The argument a caller passes back to redeem a human's approval.
pub use toolgate_policy::APPROVAL_ID;
const JSON_TYPES: &[&str] = &["string", "integer", "number", "boolean", "object", "array", "null"];
const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

pub fn check(inputs: &Inputs) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (i, tool) in inputs.tools.model.tools.iter().enumerate() {
        schema_rules(inputs, i, "/inputSchema", &tool.input_schema, &mut out);
        if let Some(output) = &tool.output_schema {
            schema_rules(inputs, i, "/outputSchema", output, &mut out);
        }
        let props = tool.input_schema.get("properties").and_then(Value::as_object);
        // Only where the generator adds it: a tool no tier gates may name its own argument so.
        let policy = &inputs.policy.model;
        let gated = policy.tiers.iter().any(|t| {
            crate::policy::decide(policy, &t.name, &tool.securable, &tool.operation).decision
                == crate::policy::Decision::ApprovalRequired
        });
        if gated && props.is_some_and(|p| p.contains_key(APPROVAL_ID)) {
            out.push(
                inputs
                    .tool_error(
                        i,
                        &format!("/inputSchema/properties/{APPROVAL_ID}"),
                        format!("`{APPROVAL_ID}` is reserved: the generator adds it to every approval-gated tool"),
                    )
                    .help(format!("remove `{APPROVAL_ID}` from inputSchema.properties")),
            );
        }
        x_mcp_headers(inputs, i, &tool.input_schema, &mut out);
    }
    out
}

fn schema_rules(inputs: &Inputs, i: usize, at: &str, schema: &Map<String, Value>, out: &mut Vec<Diagnostic>) {
    let value = Value::Object(schema.clone());
    let which = &at[1..];
    for problem in super::keywords::scan(schema) {
        out.push(
            inputs
                .tool_error(i, &format!("{at}{}", problem.pointer), format!("{which}: {}", problem.message))
                .help(problem.help),
        );
    }
    if let Some(dialect) = schema.get("$schema")
        && dialect.as_str() != Some(DIALECT)
    {
        out.push(
            inputs
                .tool_error(
                    i,
                    &format!("{at}/$schema"),
                    format!("{which} declares dialect {dialect}; toolgate serves JSON Schema 2020-12"),
                )
                .help(format!("remove `$schema` or set it to {DIALECT}")),
        );
        return;
    }
    let meta_error = jsonschema::draft202012::meta::validate(&value).err();
    if let Some(e) = &meta_error {
        let path = e.instance_path().as_str().to_string();
        let d = match (path.ends_with("/type"), value.pointer(&path).and_then(Value::as_str)) {
            (true, Some(t)) => inputs
                .tool_error(i, &format!("{at}{path}"), format!("{which}: `{t}` is not a JSON Schema type"))
                .help(crate::diag::did_you_mean(t, JSON_TYPES.iter().copied())),
            _ => inputs
                .tool_error(i, &format!("{at}{path}"), format!("{which} is not valid JSON Schema 2020-12: {e}"))
                .help("see https://json-schema.org/draft/2020-12/json-schema-core"),
        };
        out.push(d);
    } else if let Err(e) = server_options().build(&value) {
        // Valid by the meta-schema but not usable, e.g. a regex that does not compile. The
        // server compiles it on the tool's first call, trusting this check.
        out.push(
            inputs
                .tool_error(i, at, format!("{which} does not compile: {e}"))
                .help("fix the keyword the message names; remote `$ref`s are not fetched"),
        );
    }
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        out.push(
            inputs
                .tool_error(i, &format!("{at}/type"), format!("{which} must have `type: object` at its root"))
                .help(format!("set `type: object` at the root of {which} and describe the fields under `properties`")),
        );
    }
    // A top-level `allOf` whose branches only constrain the same object (no other `type`) is
    // still an object to every client; alternatives at the root are not.
    let constrains_the_object =
        |branch: &Value| branch.is_object() && branch.get("type").is_none_or(|t| t.as_str() == Some("object"));
    let all_of_is_constraints = schema
        .get("allOf")
        .and_then(Value::as_array)
        .is_some_and(|branches| branches.iter().all(constrains_the_object));
    for keyword in ["anyOf", "oneOf", "allOf"] {
        if keyword == "allOf" && all_of_is_constraints {
            continue;
        }
        if schema.contains_key(keyword) {
            out.push(
                inputs
                    .tool_error(
                        i,
                        &format!("{at}/{keyword}"),
                        format!("{which} has a top-level `{keyword}`, which many clients reject"),
                    )
                    .help("move the alternatives into a property, or split the tool in two (a top-level `allOf` whose branches only add constraints to the same object, with no other `type`, is accepted)"),
            );
        }
    }
    let mut missing = Vec::new();
    undeclared_required(&value, at.to_string(), None, &mut missing);
    for (pointer, name) in missing {
        out.push(
            inputs
                .tool_error(
                    i,
                    &format!("{pointer}/required"),
                    format!("`{name}` is required but not declared in properties"),
                )
                .help(format!("declare `{name}` under properties, or drop it from required")),
        );
    }
}

/// Subschemas whose `required` names a property their `properties` does not declare.
/// `inherited`: the properties an `anyOf`/`oneOf`/`allOf` branch's parent declares.
fn undeclared_required(
    schema: &Value,
    pointer: String,
    inherited: Option<&Map<String, Value>>,
    out: &mut Vec<(String, String)>,
) {
    let Some(obj) = schema.as_object() else {
        return;
    };
    if let Some(required) = obj.get("required").and_then(Value::as_array) {
        let props = obj.get("properties").and_then(Value::as_object);
        for name in required.iter().filter_map(Value::as_str) {
            // A subschema without `properties` of its own only adds constraints (e.g. in
            // `then`): its names are declared elsewhere. The root always declares its own.
            let constrains_only = props.is_none() && inherited.is_none() && !pointer.ends_with("Schema");
            if !constrains_only
                && !props.is_some_and(|p| p.contains_key(name))
                && !inherited.is_some_and(|p| p.contains_key(name))
            {
                out.push((pointer.clone(), name.to_string()));
            }
        }
    }
    for map_keyword in ["properties", "patternProperties", "$defs", "dependentSchemas"] {
        if let Some(children) = obj.get(map_keyword).and_then(Value::as_object) {
            for (k, child) in children {
                undeclared_required(
                    child,
                    format!("{pointer}/{map_keyword}/{}", crate::source::escape_token(k)),
                    None,
                    out,
                );
            }
        }
    }
    let own_props = obj.get("properties").and_then(Value::as_object).or(inherited);
    for list_keyword in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(children) = obj.get(list_keyword).and_then(Value::as_array) {
            for (k, child) in children.iter().enumerate() {
                undeclared_required(child, format!("{pointer}/{list_keyword}/{k}"), own_props, out);
            }
        }
    }
    for keyword in ["items", "additionalProperties", "not", "if", "then", "else", "contains"] {
        if let Some(child) = obj.get(keyword) {
            undeclared_required(child, format!("{pointer}/{keyword}"), None, out);
        }
    }
}

/// 2026-07-28 `x-mcp-header`: clients silently drop a tool whose annotation is malformed.
fn x_mcp_headers(inputs: &Inputs, i: usize, schema: &Map<String, Value>, out: &mut Vec<Diagnostic>) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let mut seen: Vec<String> = Vec::new();
    for (name, prop) in props {
        let Some(header) = prop.get("x-mcp-header") else {
            continue;
        };
        let at = format!("/inputSchema/properties/{}/x-mcp-header", crate::source::escape_token(name));
        let token_ok = header.as_str().is_some_and(|h| {
            !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        });
        if !token_ok {
            out.push(
                inputs
                    .tool_error(i, &at, format!("x-mcp-header {header} is not an HTTP header-name token"))
                    .help("use letters, digits and `-`, e.g. `Project`"),
            );
            continue;
        }
        let lower = header.as_str().unwrap_or_default().to_ascii_lowercase();
        if seen.contains(&lower) {
            out.push(
                inputs
                    .tool_error(i, &at, format!("x-mcp-header {header} is used twice (case-insensitively)"))
                    .help("give each annotated property its own header name"),
            );
        }
        seen.push(lower);
        let ty = prop.get("type").and_then(Value::as_str);
        if !matches!(ty, Some("string" | "integer" | "boolean")) {
            out.push(
                inputs
                    .tool_error(
                        i,
                        &at,
                        format!(
                            "x-mcp-header on property `{name}` of type {}",
                            ty.map_or("(none)".to_string(), |t| format!("`{t}`"))
                        ),
                    )
                    .help("only string, integer and boolean properties can be mirrored into a header"),
            );
        }
    }
}

/// The schema as served: approval-gated tools gain an optional `approval_id` string.
pub fn published(schema: &Map<String, Value>, approval_gated: bool) -> Map<String, Value> {
    let mut published = schema.clone();
    if approval_gated {
        let props = published.entry("properties").or_insert_with(|| Value::Object(Map::new()));
        if let Some(props) = props.as_object_mut() {
            props.insert(
                APPROVAL_ID.to_string(),
                json!({
                    "type": "string",
                    "description": "Set when calling again after a human approved the request: the approval_id the first call returned.",
                    "minLength": 1,
                    "maxLength": 128,
                }),
            );
        }
    }
    published
}

/// A minimal valid `arguments` object, or `None` when the schema is beyond simple guessing.
pub fn example(schema: &Map<String, Value>) -> Option<Value> {
    let value = Value::Object(schema.clone());
    let candidate = example_of(&value, 0)?;
    let validator = server_options().build(&value).ok()?;
    validator.is_valid(&candidate).then_some(candidate)
}

fn example_of(schema: &Value, depth: usize) -> Option<Value> {
    if depth > 8 {
        return None;
    }
    if let Some(c) = schema.get("const") {
        return Some(c.clone());
    }
    // An author's own example wins: it can satisfy rules beyond the schema (a handler's).
    if let Some(first) = schema.get("examples").and_then(Value::as_array).and_then(|e| e.first()) {
        return Some(first.clone());
    }
    if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return Some(first.clone());
    }
    if let Some(d) = schema.get("default") {
        return Some(d.clone());
    }
    let number = |key: &str| schema.get(key).and_then(Value::as_f64);
    match schema.get("type").and_then(Value::as_str)? {
        "string" => {
            let min = schema.get("minLength").and_then(Value::as_u64).unwrap_or(1).max(1);
            Some(Value::String("x".repeat(min as usize)))
        }
        "integer" => {
            let low = number("minimum").or(number("exclusiveMinimum").map(|m| m.floor() + 1.0)).unwrap_or(1.0);
            let high = number("maximum").unwrap_or(f64::MAX);
            Some(json!(low.min(high).ceil() as i64))
        }
        "number" => Some(json!(number("minimum").unwrap_or(1.0))),
        "boolean" => Some(Value::Bool(false)),
        "null" => Some(Value::Null),
        "array" => {
            let n = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let item = if n > 0 { example_of(schema.get("items")?, depth + 1)? } else { Value::Null };
            Some(Value::Array((0..n).map(|_| item.clone()).collect()))
        }
        "object" => {
            let props = schema.get("properties").and_then(Value::as_object);
            let mut out = Map::new();
            for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
            {
                let prop = props.and_then(|p| p.get(name))?;
                out.insert(name.to_string(), example_of(prop, depth + 1)?);
            }
            Some(Value::Object(out))
        }
        _ => None,
    }
}

/// Warns where a Rust handler would receive `serde_json::Value` instead of a typed field.
pub fn check_argument_types(inputs: &Inputs, plans: &[ToolPlan]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        if !matches!(plan.handler, super::Handler::Rust { .. }) {
            continue;
        }
        let tool = inputs.tool(i);
        let Some(props) = tool.input_schema.get("properties").and_then(Value::as_object) else {
            continue;
        };
        for (name, prop) in props {
            if let RustType::Untyped(why) = args::rust_type(prop) {
                out.push(
                    inputs
                        .tool_warning(i, &format!("/inputSchema/properties/{}", crate::source::escape_token(name)), format!("argument `{name}` ({why}) reaches the handler as serde_json::Value"))
                        .help("give the property a single `type` (string, integer, number, boolean, array with items, object with properties) for a typed field"),
                );
            }
        }
    }
    out
}

/// The options the server compiles schemas with (`toolgate_gate::arguments::options`; the
/// build cannot depend on the gate, so the two are kept alike by hand, and the cross-check
/// test `every_schema_compiles_as_the_server_compiles_it` compiles every shipped schema the
/// server's way).
fn server_options() -> jsonschema::ValidationOptions<'static> {
    jsonschema::options().with_draft(jsonschema::Draft::Draft202012).should_validate_formats(true)
}

//! Rule 13: a schema says only what it means. Every key in a schema's keyword positions must be
//! a JSON Schema 2020-12 keyword (or one toolgate declares on purpose), and none may be null.
//! What slips through otherwise: in a YAML flow mapping an unquoted comma starts a new key, so
//! `{type: integer, description: Earliest time, ms since the epoch.}` serves a key
//! `ms since the epoch.` with the value null, which every client then reads as part of the
//! schema. Values that are data (`default`, `const`, `enum`, `examples`) and the names under
//! `properties`, `patternProperties`, `$defs` and `dependentSchemas` are not keywords and are
//! not looked into as such; their schemas are.

use serde_json::{Map, Value};

use crate::diag::did_you_mean;
use crate::source::escape_token;

/// JSON Schema 2020-12's keywords: core, applicator, unevaluated, validation, meta-data,
/// format and content vocabularies.
const KEYWORDS: &[&str] = &[
    "$schema",
    "$id",
    "$ref",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$vocabulary",
    "$comment",
    "$defs",
    "prefixItems",
    "items",
    "contains",
    "additionalProperties",
    "properties",
    "patternProperties",
    "dependentSchemas",
    "propertyNames",
    "if",
    "then",
    "else",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "unevaluatedItems",
    "unevaluatedProperties",
    "type",
    "const",
    "enum",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    "title",
    "description",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "examples",
    "format",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
];

/// Keywords toolgate declares on purpose: the 2026-07-28 `x-mcp-header` property annotation.
pub const PROJECT_KEYWORDS: &[&str] = &["x-mcp-header"];

/// Keywords whose value is data, for which null is a value like any other.
const DATA: &[&str] = &["default", "const", "enum", "examples"];
/// Keywords whose value is a map of names to schemas.
const SCHEMA_MAPS: &[&str] = &["properties", "patternProperties", "$defs", "dependentSchemas"];
/// Keywords whose value is one schema.
const ONE_SCHEMA: &[&str] = &[
    "items",
    "contains",
    "additionalProperties",
    "propertyNames",
    "if",
    "then",
    "else",
    "not",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
];
/// Keywords whose value is a list of schemas.
const SCHEMA_LISTS: &[&str] = &["prefixItems", "allOf", "anyOf", "oneOf"];

/// One key that is not what a schema may hold.
#[derive(Debug, PartialEq, Eq)]
pub struct Problem {
    /// A JSON pointer from the schema's root to the key.
    pub pointer: String,
    pub message: String,
    pub help: String,
}

/// Every problem in `schema`, in document order.
pub fn scan(schema: &Map<String, Value>) -> Vec<Problem> {
    let mut out = Vec::new();
    walk(schema, "", &mut out);
    out
}

fn walk(schema: &Map<String, Value>, at: &str, out: &mut Vec<Problem>) {
    for (key, value) in schema {
        let pointer = format!("{at}/{}", escape_token(key));
        let known = KEYWORDS.contains(&key.as_str()) || PROJECT_KEYWORDS.contains(&key.as_str());
        match (known, value.is_null()) {
            (false, true) => out.push(Problem {
                pointer: pointer.clone(),
                message: format!("`{key}` is a key with no value, not a JSON Schema keyword"),
                help: "in a YAML flow mapping an unquoted comma starts a new key: quote the text (description: \"a, b\") or write it as a block".into(),
            }),
            (false, false) => out.push(Problem {
                pointer: pointer.clone(),
                message: format!("`{key}` is not a JSON Schema 2020-12 keyword"),
                help: did_you_mean(key, KEYWORDS.iter().chain(PROJECT_KEYWORDS).copied()),
            }),
            (true, true) if DATA.contains(&key.as_str()) => {}
            (true, true) => out.push(Problem {
                pointer: pointer.clone(),
                message: format!("`{key}` is null"),
                help: format!("give `{key}` a value or remove it (an empty YAML value is null)"),
            }),
            (true, false) => {}
        }
        let sub = |value: &Value, pointer: &str, out: &mut Vec<Problem>| {
            if let Value::Object(schema) = value {
                walk(schema, pointer, out);
            }
        };
        let key = key.as_str();
        if SCHEMA_MAPS.contains(&key) {
            for (name, schema) in value.as_object().into_iter().flatten() {
                sub(schema, &format!("{pointer}/{}", escape_token(name)), out);
            }
        } else if ONE_SCHEMA.contains(&key) {
            sub(value, &pointer, out);
        } else if SCHEMA_LISTS.contains(&key) {
            for (i, schema) in value.as_array().into_iter().flatten().enumerate() {
                sub(schema, &format!("{pointer}/{i}"), out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn problems(schema: Value) -> Vec<String> {
        scan(schema.as_object().unwrap()).into_iter().map(|p| format!("{} {}", p.pointer, p.message)).collect()
    }

    #[test]
    fn keys_in_keyword_positions_only() {
        let schema = json!({
            "type": "object",
            "properties": {
                "since": {"type": "integer", "description": "Earliest time", "ms since the epoch.": null},
                "name": {"type": "string", "maxLenght": 3, "x-mcp-header": "Name"},
                "items": {"type": "array", "items": {"enum": [null, {"not": "a keyword"}], "default": null}},
                "a/b": {"anyOf": [{"type": "string", "descripton": "x"}]}
            },
            "$defs": {"thing": {"type": "string", "format": null}},
            "required": ["since"]
        });
        let mut found = problems(schema);
        found.sort();
        assert_eq!(
            found,
            [
                "/$defs/thing/format `format` is null",
                "/properties/a~1b/anyOf/0/descripton `descripton` is not a JSON Schema 2020-12 keyword",
                "/properties/name/maxLenght `maxLenght` is not a JSON Schema 2020-12 keyword",
                "/properties/since/ms since the epoch. `ms since the epoch.` is a key with no value, not a JSON Schema keyword",
            ]
        );
    }
}

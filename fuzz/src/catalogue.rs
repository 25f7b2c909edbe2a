//! A generator of whole catalogues: well-formed YAML (JSON is YAML) whose tools have names,
//! hints, pairs and argument schemas drawn from the grammar's corners, so inputs get past the
//! loader to every rule and, when they check clean, to the emitters (which must then emit
//! valid Rust for any catalogue the rules accept).

use arbitrary::{Result, Unstructured};
use serde_json::{Map, Value, json};

const NAME_CHARS: &[u8] = b"abcXYZ019_.-";
const SECURABLES: &[&str] = &["Tag", "Execution", "PluginConfig", "Nope"];
const OPERATIONS: &[&str] = &["Read", "Write", "Delete", "Execute", "Nope"];
const FORMATS: &[&str] = &["date-time", "email", "uri", "uuid", "ipv4", "regex", "nonsense"];
const KEYWORDS: &[&str] =
    &["type", "self", "crate", "Self", "async", "r#type", "a-b", "2x", "", "approval_id", "secret"];

fn name(u: &mut Unstructured) -> Result<String> {
    let len = u.int_in_range(1..=12)?;
    (0..len).map(|_| u.choose(NAME_CHARS).map(|c| *c as char)).collect()
}

fn key(u: &mut Unstructured) -> Result<String> {
    Ok(if u.ratio(1, 3)? { u.choose(KEYWORDS)?.to_string() } else { name(u)? })
}

fn schema(u: &mut Unstructured, depth: u32) -> Result<Value> {
    let mut s = match u.int_in_range(0..=if depth == 0 { 6 } else { 9 })? {
        0 => json!({"type": "string", "maxLength": u.int_in_range(0..=64)?}),
        1 => json!({"type": "integer", "minimum": u.arbitrary::<i32>()?, "maximum": u.arbitrary::<i32>()?}),
        2 => json!({"type": "number"}),
        3 => json!({"type": "boolean"}),
        4 => json!({"enum": [name(u)?, name(u)?, u.arbitrary::<i8>()?]}),
        5 => json!({"type": ["string", "null"]}),
        6 => json!({"const": name(u)?, "format": u.choose(FORMATS)?}),
        7 => json!({"type": "array", "items": schema(u, depth - 1)?, "maxItems": u.int_in_range(0..=5)?}),
        8 => json!({"anyOf": [schema(u, depth - 1)?, schema(u, depth - 1)?]}),
        _ => object_schema(u, depth - 1)?,
    };
    if u.ratio(1, 6)? {
        s["writeOnly"] = Value::Bool(u.arbitrary()?);
    }
    if u.ratio(1, 6)? {
        s["description"] = Value::String(u.arbitrary()?);
    }
    Ok(s)
}

fn object_schema(u: &mut Unstructured, depth: u32) -> Result<Value> {
    let mut properties = Map::new();
    for _ in 0..u.int_in_range(0..=4)? {
        properties.insert(key(u)?, schema(u, depth)?);
    }
    let keys: Vec<String> = properties.keys().cloned().collect();
    let required: Vec<&String> = keys.iter().filter(|_| u.arbitrary().unwrap_or(false)).collect();
    let mut s = json!({"type": "object", "properties": properties, "required": required});
    if u.arbitrary()? {
        s["additionalProperties"] = Value::Bool(u.arbitrary()?);
    }
    if u.ratio(1, 5)? {
        s["$defs"] = json!({"d": schema(u, depth.saturating_sub(1))?});
        s["properties"]["r"] = json!({"$ref": "#/$defs/d"});
    }
    Ok(s)
}

fn tool(u: &mut Unstructured) -> Result<Value> {
    let operation = *u.choose(OPERATIONS)?;
    let read = operation == "Read";
    let mut t = json!({
        "name": name(u)?,
        "title": u.arbitrary::<String>()?,
        "description": u.arbitrary::<String>()?,
        "securable": u.choose(SECURABLES)?,
        "operation": operation,
        "annotations": {
            "readOnlyHint": if u.ratio(1, 8)? { !read } else { read },
            "destructiveHint": !read && u.arbitrary()?,
            "idempotentHint": u.arbitrary::<bool>()?,
            "openWorldHint": u.arbitrary::<bool>()?,
        },
        "inputSchema": object_schema(u, 2)?,
        "outputSchema": object_schema(u, 1)?,
        "handler": "builtin::echo",
    });
    if u.ratio(1, 6)? {
        t["handler"] = json!("builtin::static");
        t["result"] = json!({"content": [{"type": "text", "text": u.arbitrary::<String>()?}]});
    }
    Ok(t)
}

/// A catalogue as text, from `bytes`.
pub fn generate(bytes: &[u8]) -> Option<String> {
    let mut u = Unstructured::new(bytes);
    let count = u.int_in_range(1..=4).ok()?;
    let tools: Vec<Value> = (0..count).map(|_| tool(&mut u)).collect::<Result<_>>().ok()?;
    serde_json::to_string_pretty(&json!({"tools": tools})).ok()
}

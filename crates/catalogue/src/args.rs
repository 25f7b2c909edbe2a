//! JSON Schema property -> Rust type, for the typed argument structs handlers receive.
//! Covers the schemas catalogues use; anything else falls back to `serde_json::Value`
//! (and the checks warn, so the author knows).

use serde_json::Value;

#[derive(Clone, Debug, PartialEq)]
pub enum RustType {
    Str,
    Int,
    Float,
    Bool,
    List(Box<RustType>),
    /// An object with declared properties: a nested struct.
    Object(serde_json::Map<String, Value>),
    /// An object without declared properties: a free-form map.
    FreeMap,
    /// Why no simple type fits.
    Untyped(String),
}

pub fn rust_type(schema: &Value) -> RustType {
    let Some(obj) = schema.as_object() else {
        return RustType::Untyped("a boolean schema".into());
    };
    for keyword in ["anyOf", "oneOf", "allOf", "$ref"] {
        if obj.contains_key(keyword) {
            return RustType::Untyped(format!("uses `{keyword}`"));
        }
    }
    match obj.get("type") {
        Some(Value::String(t)) => match t.as_str() {
            "string" => RustType::Str,
            "integer" => RustType::Int,
            "number" => RustType::Float,
            "boolean" => RustType::Bool,
            "array" => match obj.get("items") {
                Some(items) => match rust_type(items) {
                    RustType::Untyped(why) => RustType::Untyped(format!("its items: {why}")),
                    inner => RustType::List(Box::new(inner)),
                },
                None => RustType::List(Box::new(RustType::Untyped("no items schema".into()))),
            },
            "object" => match obj.get("properties").and_then(Value::as_object) {
                Some(props) if !props.is_empty() => RustType::Object(obj.clone()),
                _ => RustType::FreeMap,
            },
            other => RustType::Untyped(format!("type `{other}`")),
        },
        Some(Value::Array(_)) => RustType::Untyped("a list of types".into()),
        _ => RustType::Untyped("no `type`".into()),
    }
}

/// `get_plugin_config` -> `GetPluginConfig`; other characters split words too.
pub fn pascal_case(name: &str) -> String {
    let mut out = String::new();
    for word in name.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()) {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(chars);
        }
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'T');
    }
    out
}

/// One struct name per tool, unique even when two tool names fold to the same PascalCase.
pub fn struct_names(tools: &[crate::model::Tool]) -> Vec<String> {
    let mut taken = std::collections::HashSet::new();
    tools
        .iter()
        .map(|t| {
            let base = pascal_case(&t.name);
            let mut name = base.clone();
            let mut n = 2;
            while !taken.insert(name.clone()) {
                name = format!("{base}{n}");
                n += 1;
            }
            name
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names() {
        assert_eq!(pascal_case("get_plugin_config"), "GetPluginConfig");
        assert_eq!(pascal_case("a.b-c"), "ABC");
        assert_eq!(pascal_case("2fa"), "T2fa");
    }

    #[test]
    fn types() {
        assert_eq!(
            rust_type(&json!({"type": "array", "items": {"type": "integer"}})),
            RustType::List(Box::new(RustType::Int))
        );
        assert!(matches!(rust_type(&json!({"type": ["string", "null"]})), RustType::Untyped(_)));
        assert_eq!(rust_type(&json!({"type": "object"})), RustType::FreeMap);
    }
}

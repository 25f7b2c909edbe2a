//! Reading the two files: YAML syntax, then shape (unknown, missing and mistyped keys, every
//! one of them at once), then the typed model. The shape rules come from the model's own
//! JSON Schema, so the editor schemas and these checks can never disagree.

use jsonschema::ValidationError;
use jsonschema::error::ValidationErrorKind;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::diag::{Diagnostic, did_you_mean};
use crate::model::{Catalogue, Policy};
use crate::source::{self, SourceFile, SourceMap};

/// A parsed file: its typed model, the JSON it came from and where each node sits.
#[derive(Debug)]
pub struct Parsed<T> {
    pub model: T,
    pub json: Value,
    pub map: SourceMap,
    pub file: SourceFile,
    /// For a catalogue: the YAML index of each model tool (they differ only when broken
    /// entries were set aside so that the other checks could still run).
    pub tool_sources: Vec<usize>,
}

/// The shape problems of one instance path: where (a JSON pointer) and what.
type ShapeProblems = Vec<(String, Vec<Diagnostic>)>;

/// Syntax and shape: the JSON, its positions, and every shape problem with the pointer of
/// the error that raised it.
fn shape<T: JsonSchema>(file: &SourceFile) -> Result<(Value, SourceMap, ShapeProblems), Vec<Diagnostic>> {
    let (json, map) = source::parse(file).map_err(|d| vec![d])?;
    let schema = schema_of::<T>();
    let validator = jsonschema::validator_for(&schema).expect("the model's own schema compiles");
    let problems = validator
        .iter_errors(&json)
        .map(|error| {
            let mut diagnostics = Vec::new();
            shape_diagnostics(&error, &schema, &json, file, &map, &mut diagnostics);
            (error.instance_path().as_str().to_string(), diagnostics)
        })
        .collect();
    Ok((json, map, problems))
}

fn typed<T: DeserializeOwned>(json: &Value, file: &SourceFile, map: &SourceMap) -> Result<T, Vec<Diagnostic>> {
    serde_json::from_value(json.clone())
        .map_err(|e| vec![Diagnostic::error(&file.name, map.value(""), format!("cannot read the file: {e}"))])
}

/// Parses and shape-checks one file.
pub fn parse<T: JsonSchema + DeserializeOwned>(file: &SourceFile) -> Result<Parsed<T>, Vec<Diagnostic>> {
    let (json, map, problems) = shape::<T>(file)?;
    if !problems.is_empty() {
        return Err(problems.into_iter().flat_map(|(_, d)| d).collect());
    }
    let model = typed(&json, file, &map)?;
    Ok(Parsed { model, tool_sources: Vec::new(), json, map, file: file.clone() })
}

pub fn parse_catalogue(file: &SourceFile) -> Result<Parsed<Catalogue>, Vec<Diagnostic>> {
    match parse_catalogue_recovering(file) {
        (Some(parsed), shape) if shape.is_empty() => Ok(parsed),
        (_, shape) => Err(shape),
    }
}

/// Like [`parse_catalogue`], but when only some tool entries are malformed, returns the others
/// too, so the cross-file rules can still report on them in the same run.
pub fn parse_catalogue_recovering(file: &SourceFile) -> (Option<Parsed<Catalogue>>, Vec<Diagnostic>) {
    let (json, map, problems) = match shape::<Catalogue>(file) {
        Ok(x) => x,
        Err(d) => return (None, d),
    };
    let broken: Option<std::collections::BTreeSet<usize>> = problems
        .iter()
        .map(|(pointer, _)| {
            pointer.strip_prefix("/tools/").and_then(|r| r.split('/').next()).and_then(|i| i.parse().ok())
        })
        .collect();
    let diagnostics: Vec<Diagnostic> = problems.into_iter().flat_map(|(_, d)| d).collect();
    // A problem outside a tool entry (e.g. no `tools` list): nothing to recover.
    let Some(broken) = broken else { return (None, diagnostics) };
    let entries = json.get("tools").and_then(Value::as_array).cloned().unwrap_or_default();
    let (kept, tool_sources): (Vec<Value>, Vec<usize>) =
        entries.into_iter().enumerate().filter(|(i, _)| !broken.contains(i)).map(|(i, t)| (t, i)).unzip();
    let mut recovered = json.clone();
    recovered["tools"] = Value::Array(kept);
    match typed(&recovered, file, &map) {
        Ok(model) => (Some(Parsed { model, tool_sources, json, map, file: file.clone() }), diagnostics),
        Err(mut d) => {
            d.extend(diagnostics);
            (None, d)
        }
    }
}

pub fn parse_policy(file: &SourceFile) -> Result<Parsed<Policy>, Vec<Diagnostic>> {
    parse(file)
}

pub fn schema_of<T: JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(T)).expect("a schema serializes")
}

/// Names the tool an instance path is inside of, for `tools.yaml` diagnostics.
fn tool_at(json: &Value, pointer: &str) -> Option<String> {
    let rest = pointer.strip_prefix("/tools/")?;
    let index = rest.split('/').next()?;
    json.pointer(&format!("/tools/{index}/name"))?.as_str().map(str::to_string)
}

fn shape_diagnostics(
    error: &ValidationError<'_>,
    schema: &Value,
    json: &Value,
    file: &SourceFile,
    map: &SourceMap,
    out: &mut Vec<Diagnostic>,
) {
    let pointer = error.instance_path().as_str().to_string();
    let tool = tool_at(json, &pointer);
    let here = describe(&pointer);
    let mut push = |d: Diagnostic| {
        out.push(match &tool {
            Some(t) => d.tool(t),
            None => d,
        })
    };
    match error.kind() {
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            let known = allowed_keys(schema, json, &pointer);
            for key in unexpected {
                let at = format!("{pointer}/{}", source::escape_token(key));
                let mut d = Diagnostic::error(&file.name, map.key(&at), format!("unknown key `{key}` in {here}"));
                if !known.is_empty() {
                    d = d.help(did_you_mean(key, known.iter().map(String::as_str)));
                }
                push(d);
            }
        }
        ValidationErrorKind::Required { property } => {
            let key = property.as_str().unwrap_or_default();
            push(Diagnostic::error(&file.name, map.key(&pointer), format!("missing required key `{key}` in {here}")));
        }
        ValidationErrorKind::Type { kind } => {
            let expected = format!("{kind:?}").to_lowercase().replace("single(", "").replace(')', "");
            let found = json.pointer(&pointer).map(json_type).unwrap_or("nothing");
            push(Diagnostic::error(
                &file.name,
                map.value(&pointer),
                format!("{here} must be {}, found {found}", with_article(&expected)),
            ));
        }
        ValidationErrorKind::Enum { options } => {
            let found = json.pointer(&pointer).cloned().unwrap_or(Value::Null);
            let names: Vec<&str> =
                options.as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
            let mut d = Diagnostic::error(&file.name, map.value(&pointer), format!("{here} cannot be {found}"));
            if let Some(s) = found.as_str() {
                d = d.help(did_you_mean(s, names.iter().copied()));
            }
            push(d);
        }
        ValidationErrorKind::AnyOf { context } | ValidationErrorKind::OneOfNotValid { context } => {
            // One key per alternative (a tagged choice, e.g. a compliance check): a key that is
            // none of them is named as such, with the closest, not as one alternative's miss.
            let variants: Vec<String> = context
                .iter()
                .filter_map(|branch| {
                    branch.iter().find_map(|e| match e.kind() {
                        ValidationErrorKind::Required { property } => property.as_str().map(str::to_string),
                        _ => None,
                    })
                })
                .collect();
            let found: Vec<String> = json
                .pointer(&pointer)
                .and_then(Value::as_object)
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default();
            if variants.len() == context.len()
                && variants.len() > 1
                && !found.is_empty()
                && found.iter().all(|k| !variants.contains(k))
            {
                let expected: Vec<String> = variants.iter().map(|v| format!("`{v}`")).collect();
                for key in &found {
                    let at = format!("{pointer}/{}", source::escape_token(key));
                    let message = format!("{here} cannot be `{key}`: it is exactly one of {}", expected.join(", "));
                    push(
                        Diagnostic::error(&file.name, map.key(&at), message)
                            .help(did_you_mean(key, variants.iter().map(String::as_str))),
                    );
                }
                return;
            }
            // Report the alternative that came closest: its errors say what to fix.
            match context.iter().min_by_key(|branch| branch.len()) {
                Some(branch) if !branch.is_empty() => {
                    for e in branch {
                        shape_diagnostics(e, schema, json, file, map, out);
                    }
                }
                _ => push(Diagnostic::error(&file.name, map.value(&pointer), format!("{here} is not valid: {error}"))),
            }
        }
        _ => push(Diagnostic::error(&file.name, map.value(&pointer), format!("{here} is not valid: {error}"))),
    }
}

fn with_article(kind: &str) -> String {
    match kind.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u') => format!("an {kind}"),
        _ => format!("a {kind}"),
    }
}

pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// "`annotations`" / "tool entry" / "the file": how a reader recognises the place.
fn describe(pointer: &str) -> String {
    let tokens: Vec<&str> = pointer.split('/').skip(1).collect();
    match tokens.as_slice() {
        [] => "the top level".to_string(),
        [.., last] if last.parse::<usize>().is_ok() => match tokens.get(tokens.len().wrapping_sub(2)) {
            Some(&"tools") => "the tool entry".to_string(),
            Some(parent) => format!("an entry of `{parent}`"),
            None => "the entry".to_string(),
        },
        [.., last] => format!("`{}`", last.replace("~1", "/").replace("~0", "~")),
    }
}

/// The keys the model's schema allows at `pointer`, for "did you mean".
fn allowed_keys(schema: &Value, json: &Value, pointer: &str) -> Vec<String> {
    let mut node = schema;
    let mut instance = json;
    for token in pointer.split('/').skip(1) {
        node = resolve(schema, node, instance);
        let token = token.replace("~1", "/").replace("~0", "~");
        let next = match instance {
            Value::Array(items) => {
                let Ok(i) = token.parse::<usize>() else {
                    return vec![];
                };
                instance = &items[i.min(items.len().saturating_sub(1))];
                node.get("items")
            }
            Value::Object(o) => {
                let Some(v) = o.get(&token) else {
                    return vec![];
                };
                instance = v;
                node.get("properties").and_then(|p| p.get(&token))
            }
            _ => None,
        };
        match next {
            Some(n) => node = n,
            None => return vec![],
        }
    }
    let node = resolve(schema, node, instance);
    let mut keys: Vec<String> =
        node.get("properties").and_then(Value::as_object).map(|p| p.keys().cloned().collect()).unwrap_or_default();
    keys.sort();
    keys
}

/// Follows `$ref` and picks the `oneOf`/`anyOf` branch whose `type` tag fits the instance.
fn resolve<'a>(root: &'a Value, mut node: &'a Value, instance: &Value) -> &'a Value {
    for _ in 0..16 {
        if let Some(r) = node.get("$ref").and_then(Value::as_str) {
            match r.strip_prefix('#').and_then(|p| root.pointer(p)) {
                Some(target) => {
                    node = target;
                    continue;
                }
                None => return node,
            }
        }
        let branches = node.get("oneOf").or_else(|| node.get("anyOf")).and_then(Value::as_array);
        if let Some(branches) = branches {
            let tag = instance.get("type").and_then(Value::as_str);
            let chosen = branches.iter().find(|b| {
                let b = b
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| root.pointer(r.trim_start_matches('#')))
                    .unwrap_or(b);
                match (tag, b.pointer("/properties/type/const").and_then(Value::as_str)) {
                    (Some(t), Some(c)) => t == c,
                    _ => b.get("properties").is_some() && instance.is_object(),
                }
            });
            match chosen {
                Some(b) => {
                    node = b;
                    continue;
                }
                None => return node,
            }
        }
        return node;
    }
    node
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unknown_key_is_reported() {
        let file =
            SourceFile::new("tools.yaml", "tools:\n  - name: a\n    titel: A\n    annotations: {readonlyHint: true}\n");
        let errors = parse_catalogue(&file).unwrap_err();
        let lines: Vec<String> = errors.iter().map(Diagnostic::one_line).collect();
        assert!(
            lines.iter().any(|l| l.contains(
                "tools.yaml:3:5: error: tool `a`: unknown key `titel` in the tool entry (help: did you mean `title`?)"
            )),
            "{lines:#?}"
        );
        assert!(
            lines.iter().any(|l| l.contains(
                "unknown key `readonlyHint` in `annotations` (help: did you mean `readOnlyHint`?)"
            )),
            "{lines:#?}"
        );
        assert!(lines.iter().any(|l| l.contains("missing required key `handler`")), "{lines:#?}");
    }
}

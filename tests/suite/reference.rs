//! Every served tool that the reference surface names (tests/reference/tool-surface.json, a copy
//! kept in the project) keeps that surface's RBAC pair and four hints, and accepts its
//! arguments: each by its own name or by an alias tools.yaml declares, within bounds at least
//! as wide as the reference states, and requires nothing the reference leaves optional. What
//! cannot be so is named in docs/differences.md as `tool.argument`, with why.

use serde_json::{Map, Value};
use toolgate::registry::{CATALOGUE, ToolId};
use toolgate_domain::aliases::{ArgumentAlias, Conversion};

fn reference() -> Vec<Value> {
    let text = include_str!("../reference/tool-surface.json");
    serde_json::from_str(text).expect("the reference copy is JSON")
}

#[test]
fn tools_the_reference_names_keep_its_pair_and_hints() {
    let mut compared = 0;
    let mut differences = Vec::new();
    for entry in &reference() {
        let name = entry["name"].as_str().expect("every entry has a name");
        let Some(tool) = ToolId::from_name(name) else { continue };
        compared += 1;
        let m = tool.meta();
        let ours = [
            ("securable", Value::from(m.securable)),
            ("operation", Value::from(m.operation)),
            ("readOnlyHint", Value::from(m.annotations.read_only)),
            ("destructiveHint", Value::from(m.annotations.destructive)),
            ("idempotentHint", Value::from(m.annotations.idempotent)),
            ("openWorldHint", Value::from(m.annotations.open_world)),
        ];
        for (field, value) in ours {
            let theirs = match field {
                "securable" | "operation" => &entry[field],
                hint => &entry["annotations"][hint],
            };
            if *theirs != value {
                differences.push(format!("{name}: {field} is {value} here, {theirs} in the reference"));
            }
        }
    }
    assert!(compared >= 40, "only {compared} served tools are named by the reference: is the copy whole?");
    assert!(differences.is_empty(), "{} difference(s):\n{}", differences.len(), differences.join("\n"));
}

/// One way an argument of the reference's is not served as it states, keyed `tool.argument`.
struct Difference {
    key: String,
    what: String,
}

fn properties(schema: &Value) -> Map<String, Value> {
    schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default()
}

fn required(schema: &Value) -> Vec<String> {
    let list = schema.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
    list.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()
}

/// Where ours is narrower than a bound the reference states (bounds it leaves out are ours to set).
fn narrower(theirs: &Value, ours: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let number = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64);
    if theirs.get("type").is_some() && theirs.get("type") != ours.get("type") {
        out.push(format!("type {} here, {} there", ours["type"], theirs["type"]));
    }
    for upper in ["maximum", "maxLength", "maxItems"] {
        if let (Some(t), Some(o)) = (number(theirs, upper), number(ours, upper))
            && o < t
        {
            out.push(format!("{upper} {o} here, {t} there"));
        }
    }
    for lower in ["minimum", "minLength", "minItems"] {
        let (t, o) = (number(theirs, lower).unwrap_or(f64::MIN), number(ours, lower).unwrap_or(f64::MIN));
        if o > t && theirs.get(lower).is_some() {
            out.push(format!("{lower} {o} here, {t} there"));
        }
    }
    if let Some(values) = theirs.get("enum").and_then(Value::as_array) {
        let ours_enum = ours.get("enum").and_then(Value::as_array);
        let missing: Vec<&Value> = values.iter().filter(|v| ours_enum.is_some_and(|e| !e.contains(v))).collect();
        if !missing.is_empty() {
            out.push(format!("enum lacks {missing:?}"));
        }
    }
    if theirs.get("pattern").is_some() && theirs.get("pattern") != ours.get("pattern") {
        out.push(format!("pattern {} here, {} there", ours["pattern"], theirs["pattern"]));
    }
    out
}

/// Compares the reference's object schema `theirs` with ours, the aliases declared `within`.
fn compare(
    tool: &str,
    at: &str,
    theirs: &Value,
    ours: &Value,
    all: &'static [ArgumentAlias],
    within: Option<&str>,
) -> Vec<Difference> {
    let mut out = Vec::new();
    let ours_props = properties(ours);
    let aliases: Vec<&ArgumentAlias> = all.iter().filter(|a| a.within == within).collect();
    let diff = |arg: &str, what: String| Difference { key: format!("{tool}.{at}{arg}"), what };
    for (arg, their_prop) in properties(theirs) {
        if let Some(our_prop) = ours_props.get(&arg) {
            out.extend(narrower(&their_prop, our_prop).into_iter().map(|w| diff(&arg, w)));
            match their_prop.get("items") {
                Some(items) if items.get("properties").is_some() => {
                    let nested = format!("{at}{arg}[].");
                    out.extend(compare(tool, &nested, items, &our_prop["items"], all, Some(&arg)));
                }
                Some(items) => out.extend(narrower(items, &our_prop["items"]).into_iter().map(|w| diff(&arg, w))),
                None => {}
            }
            continue;
        }
        let alias = aliases.iter().find(|a| a.name == arg);
        let partner = aliases.iter().any(|a| matches!(a.conversion, Conversion::Pair { with } if with == arg));
        match alias {
            None if partner => {}
            None => out.push(diff(&arg, "not accepted".into())),
            Some(alias) => {
                let target = &ours_props[alias.stands_for];
                let problems = match alias.conversion {
                    Conversion::Same => narrower(&their_prop, target),
                    Conversion::OneItemList => narrower(&their_prop, &target["items"]),
                    Conversion::Values(map) => {
                        let values = their_prop.get("enum").and_then(Value::as_array).cloned().unwrap_or_default();
                        values
                            .iter()
                            .filter(|v| !map.iter().any(|(from, _)| v.as_str() == Some(from)))
                            .map(|v| format!("value {v} has no mapping"))
                            .collect()
                    }
                    Conversion::Pair { .. } => vec![],
                };
                out.extend(problems.into_iter().map(|w| diff(&arg, w)));
            }
        }
    }
    let their_required = required(theirs);
    for arg in required(ours) {
        let by_alias = aliases.iter().any(|a| a.stands_for == arg && their_required.iter().any(|r| r == a.name));
        if !their_required.contains(&arg) && !by_alias {
            out.push(diff(&arg, "required here, optional there".into()));
        }
    }
    out
}

#[test]
fn reference_arguments_are_accepted_by_name_or_alias_within_its_bounds() {
    let documented = include_str!("../../docs/differences.md");
    let mut compared = 0;
    let mut undocumented = Vec::new();
    for entry in &reference() {
        let name = entry["name"].as_str().unwrap();
        let Some(tool) = ToolId::from_name(name) else { continue };
        compared += 1;
        let meta = tool.meta();
        let ours: Value = serde_json::from_str(meta.input_schema).unwrap();
        for d in compare(name, "", &entry["input_schema"], &ours, meta.aliases, None) {
            if !documented.contains(&format!("`{}`", d.key)) {
                undocumented.push(format!("{}: {}", d.key, d.what));
            }
        }
    }
    assert!(compared >= 40, "only {compared} served tools are named by the reference");
    assert!(
        undocumented.is_empty(),
        "{} difference(s) from the reference's arguments that docs/differences.md does not name as `tool.argument`:\n{}",
        undocumented.len(),
        undocumented.join("\n")
    );
    assert!(CATALOGUE.tools.iter().any(|t| !t.aliases.is_empty()), "no tool declares an alias");
}

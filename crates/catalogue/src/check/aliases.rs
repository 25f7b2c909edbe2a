//! `aliases`: each names an argument of the tool's own (at the root, or in the items of a
//! `within` array), is not one itself, and converts in exactly one way that fits the
//! argument's type. The gate rewrites aliases blind, so the build proves they land.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::{APPROVAL_ID, Inputs};
use crate::diag::Diagnostic;
use crate::model::AliasSpec;

pub fn check(inputs: &Inputs) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (i, tool) in inputs.tools.model.tools.iter().enumerate() {
        let mut taken: HashSet<(Option<&str>, &str)> = HashSet::new();
        for (j, alias) in tool.aliases.iter().enumerate() {
            let at = |field: &str| format!("/aliases/{j}/{field}");
            let Some(scope) = scope(&tool.input_schema, alias.within.as_deref()) else {
                let within = alias.within.as_deref().unwrap_or_default();
                out.push(
                    inputs
                        .tool_error(i, &at("within"), format!("`within: {within}` is not an array argument of objects"))
                        .help("name an argument whose schema is `type: array` with `items: {type: object, properties: ...}`"),
                );
                continue;
            };
            for name in std::iter::once(&alias.name).chain(alias.with.as_ref()) {
                let field = if *name == alias.name { "name" } else { "with" };
                if scope.contains_key(name) || name == APPROVAL_ID {
                    out.push(
                        inputs
                            .tool_error(i, &at(field), format!("alias `{name}` is an argument of the tool already"))
                            .help("an alias is another name for an argument: drop it, or rename the argument"),
                    );
                }
                if !taken.insert((alias.within.as_deref(), name)) {
                    out.push(inputs.tool_error(i, &at(field), format!("alias `{name}` is declared twice")));
                }
            }
            let Some(target) = scope.get(&alias.stands_for) else {
                let known: Vec<&str> = scope.keys().map(String::as_str).collect();
                out.push(
                    inputs
                        .tool_error(i, &at("for"), format!("`for: {}` names no argument of the tool", alias.stands_for))
                        .help(format!("one of: {}", known.join(", "))),
                );
                continue;
            };
            if let Some(problem) = conversion_problem(alias, target) {
                out.push(inputs.tool_error(i, &at("for"), problem.0).help(problem.1));
            }
        }
    }
    out
}

/// The properties the alias sits beside.
fn scope<'a>(schema: &'a Map<String, Value>, within: Option<&str>) -> Option<&'a Map<String, Value>> {
    let root = schema.get("properties")?.as_object()?;
    match within {
        None => Some(root),
        Some(array) => {
            let array = root.get(array)?;
            (array.get("type")? == "array").then_some(())?;
            array.get("items")?.get("properties")?.as_object()
        }
    }
}

fn conversion_problem(alias: &AliasSpec, target: &Value) -> Option<(String, String)> {
    let ways =
        usize::from(alias.one_item_list) + usize::from(!alias.values.is_empty()) + usize::from(alias.with.is_some());
    if ways > 1 {
        return Some((
            format!("alias `{}` converts in {ways} ways", alias.name),
            "give at most one of `oneItemList`, `values` and `with`".into(),
        ));
    }
    let ty = target.get("type").and_then(Value::as_str).unwrap_or("(untyped)");
    let (name, target_name) = (&alias.name, &alias.stands_for);
    if alias.one_item_list && ty != "array" {
        return Some((
            format!("`oneItemList` needs an array argument; `{target_name}` is {ty}"),
            "drop `oneItemList`".into(),
        ));
    }
    if alias.with.is_some() && ty != "string" {
        return Some((
            format!("a pair alias yields a string; `{target_name}` is {ty}"),
            "point `for` at a string argument".into(),
        ));
    }
    let allowed: Option<Vec<&Value>> = target.get("enum").and_then(Value::as_array).map(|e| e.iter().collect());
    if let Some(allowed) = allowed {
        let outside: Vec<&str> = alias
            .values
            .values()
            .filter(|v| !allowed.contains(&&Value::from(v.as_str())))
            .map(String::as_str)
            .collect();
        if !outside.is_empty() {
            return Some((
                format!("alias `{name}` maps to {}, outside `{target_name}`'s enum", outside.join(", ")),
                "map each reference value to one of the argument's".into(),
            ));
        }
    }
    None
}

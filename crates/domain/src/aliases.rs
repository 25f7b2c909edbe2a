//! Argument names of the reference surface that a tool accepts for one of its own
//! (tools.yaml `aliases`): a client written for the reference server calls with its names
//! and is answered as if it had used toolgate's. The gate rewrites them before the schema
//! check, so everything after it (approval tickets, audit, handlers) sees one name only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::denial::ArgumentProblem;

/// One alias as tools.yaml declares it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AliasSpec {
    /// The reference's argument name.
    pub name: String,
    /// The tool's own argument it stands for.
    #[serde(rename = "for")]
    pub stands_for: String,
    /// An array argument whose items take the alias (each item an object), instead of the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<String>,
    /// The value becomes a list of one (the reference names one item where toolgate takes a list).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub one_item_list: bool,
    /// The reference's values, each mapped to the argument's (a value not listed is refused).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, String>,
    /// A second reference argument that, with this one, names the value (`plugin` with
    /// `action` names a definition); the server resolves the pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub with: Option<String>,
}

/// One alias as the generated registry carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgumentAlias {
    pub name: &'static str,
    pub stands_for: &'static str,
    pub within: Option<&'static str>,
    pub conversion: Conversion,
}

impl ArgumentAlias {
    /// One line for a reader: which reference name stands for which argument, and how.
    pub fn explained(&self) -> String {
        let (name, target) = (self.name, self.stands_for);
        let how = match self.conversion {
            Conversion::Same => format!("`{name}` for `{target}`"),
            Conversion::OneItemList => format!("`{name}` for `{target}` (a list of that one)"),
            Conversion::Values(map) => {
                let pairs: Vec<String> = map.iter().map(|(from, to)| format!("{from} → {to}")).collect();
                format!("`{name}` for `{target}` ({})", pairs.join(", "))
            }
            Conversion::Pair { with } => {
                format!("`{name}` with `{with}` for `{target}` (the published definition that runs that action)")
            }
        };
        match self.within {
            Some(array) => format!("in each item of `{array}`: {how}"),
            None => how,
        }
    }
}

/// Every tool's aliases as a markdown list (docs/differences.md holds it between markers).
pub fn markdown<'a>(tools: impl IntoIterator<Item = (&'a str, &'a [ArgumentAlias])>) -> String {
    let mut out = String::new();
    for (tool, aliases) in tools {
        if !aliases.is_empty() {
            let lines: Vec<String> = aliases.iter().map(ArgumentAlias::explained).collect();
            out.push_str(&format!("- `{tool}`: {}\n", lines.join("; ")));
        }
    }
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conversion {
    Same,
    OneItemList,
    Values(&'static [(&'static str, &'static str)]),
    /// The pair (this alias, `with`) names the value: resolved by the server.
    Pair {
        with: &'static str,
    },
}

/// Resolves a pair alias: `(alias, first, second)` → the argument's value, or why not.
pub type PairResolver<'a> = &'a dyn Fn(&ArgumentAlias, &str, &str) -> Result<String, String>;

/// Rewrites every alias in `arguments` to the tool's own name. Problems name the alias's
/// pointer; an argument given under both names must carry the same value.
pub fn apply(aliases: &[ArgumentAlias], arguments: &mut Value, resolve: PairResolver) -> Vec<ArgumentProblem> {
    let mut problems = Vec::new();
    let Some(object) = arguments.as_object_mut() else { return problems };
    for alias in aliases {
        match alias.within {
            None => rewrite(alias, object, "", resolve, &mut problems),
            Some(array) => {
                let Some(Value::Array(items)) = object.get_mut(array) else { continue };
                for (i, item) in items.iter_mut().enumerate() {
                    if let Some(item) = item.as_object_mut() {
                        rewrite(alias, item, &format!("/{array}/{i}"), resolve, &mut problems);
                    }
                }
            }
        }
    }
    problems
}

fn rewrite(
    alias: &ArgumentAlias,
    object: &mut Map<String, Value>,
    at: &str,
    resolve: PairResolver,
    problems: &mut Vec<ArgumentProblem>,
) {
    let Some(given) = object.remove(alias.name) else { return };
    let pointer = format!("{at}/{}", alias.name);
    let (name, target) = (alias.name, alias.stands_for);
    let mut problem = |message: String| problems.push(ArgumentProblem { pointer: pointer.clone(), message });
    let converted = match alias.conversion {
        Conversion::Same => Ok(given),
        Conversion::OneItemList => Ok(Value::Array(vec![given])),
        Conversion::Values(map) => match given.as_str().and_then(|v| map.iter().find(|(from, _)| *from == v)) {
            Some((_, to)) => Ok(Value::from(*to)),
            None => {
                let accepted: Vec<&str> = map.iter().map(|(from, _)| *from).collect();
                Err(format!(
                    "`{name}` (the reference's name for `{target}`) takes one of {}, not {given}",
                    accepted.join(", ")
                ))
            }
        },
        Conversion::Pair { with } => match (given.as_str(), object.remove(with)) {
            (Some(first), Some(Value::String(second))) => resolve(alias, first, &second).map(Value::from),
            (Some(_), None) => Err(format!(
                "`{name}` and `{with}` name a `{target}` together (the reference's way): give both, or `{target}` alone"
            )),
            _ => Err(format!("`{name}` and `{with}` must both be strings")),
        },
    };
    let converted = match converted {
        Ok(value) => value,
        Err(message) => return problem(message),
    };
    match object.get(target) {
        Some(own) if *own != converted => problem(format!(
            "`{name}` is the reference's name for `{target}`, and both were given with different values \
             ({converted} and {own}): send one of them"
        )),
        Some(_) => {}
        None => {
            object.insert(target.to_string(), converted);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TYPES: &[(&str, &str)] = &[("question", "read"), ("action", "change")];
    const ALIASES: &[ArgumentAlias] = &[
        ArgumentAlias { name: "id", stands_for: "name", within: None, conversion: Conversion::Same },
        ArgumentAlias { name: "type", stands_for: "class", within: None, conversion: Conversion::Values(TYPES) },
        ArgumentAlias { name: "agent_id", stands_for: "agent_ids", within: None, conversion: Conversion::OneItemList },
        ArgumentAlias {
            name: "plugin",
            stands_for: "definition",
            within: Some("steps"),
            conversion: Conversion::Pair { with: "action" },
        },
    ];

    fn resolve(_: &ArgumentAlias, plugin: &str, action: &str) -> Result<String, String> {
        match (plugin, action) {
            ("host", "facts") => Ok("os_facts".into()),
            _ => Err(format!("no definition runs {plugin}.{action}")),
        }
    }

    fn applied(mut arguments: Value) -> Result<Value, Vec<ArgumentProblem>> {
        let problems = apply(ALIASES, &mut arguments, &resolve);
        if problems.is_empty() { Ok(arguments) } else { Err(problems) }
    }

    #[test]
    fn each_conversion_yields_the_tools_own_argument() {
        let given = json!({"id": "a", "type": "action", "agent_id": "x",
                           "steps": [{"plugin": "host", "action": "facts", "params": {}}, {"definition": "d"}]});
        let want = json!({"name": "a", "class": "change", "agent_ids": ["x"],
                          "steps": [{"definition": "os_facts", "params": {}}, {"definition": "d"}]});
        assert_eq!(applied(given).unwrap(), want);
    }

    #[test]
    fn both_names_agreeing_pass_and_disagreeing_are_refused_at_the_alias() {
        assert_eq!(applied(json!({"id": "a", "name": "a"})).unwrap(), json!({"name": "a"}));
        let problems = applied(json!({"id": "a", "name": "b"})).unwrap_err();
        assert_eq!(problems[0].pointer, "/id");
        assert!(problems[0].message.contains("different values"), "{}", problems[0].message);
    }

    #[test]
    fn unmapped_values_half_pairs_and_unknown_pairs_say_what_to_send() {
        let problems = applied(json!({"type": "sensor"})).unwrap_err();
        assert!(problems[0].message.contains("question, action"), "{}", problems[0].message);
        let problems = applied(json!({"steps": [{"plugin": "host"}]})).unwrap_err();
        assert_eq!(problems[0].pointer, "/steps/0/plugin");
        assert!(problems[0].message.contains("give both"), "{}", problems[0].message);
        let problems = applied(json!({"steps": [{"plugin": "host", "action": "nope"}]})).unwrap_err();
        assert!(problems[0].message.contains("no definition runs host.nope"), "{}", problems[0].message);
    }

    #[test]
    fn arguments_without_aliases_are_untouched() {
        let plain = json!({"name": "a", "steps": "not a list"});
        assert_eq!(applied(plain.clone()).unwrap(), plain);
        assert_eq!(applied(json!(null)).unwrap(), json!(null));
    }
}

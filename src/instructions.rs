//! The instruction set the build checked ([`crate::registry::INSTRUCTIONS`]): lookups, each
//! definition's compiled parameter schema, and the check of an execution's definitions and
//! parameters that the gate runs before any approval work ([`InstructionCheck`]). Outside the
//! handlers, so that a catalogue without the execution tools builds without them.

use std::collections::HashMap;
use std::sync::LazyLock;

use serde_json::{Map, Value};
use toolgate_domain::ToolError;
use toolgate_domain::catalogue::ToolMeta;
use toolgate_domain::denial::ArgumentProblem;
use toolgate_domain::fleet::instruction::{Definition, InstructionSet};
use toolgate_gate::ArgumentCheck;

use crate::registry::INSTRUCTIONS;

/// Each definition's parameter schema, compiled once.
static PARAMETER_VALIDATORS: LazyLock<HashMap<&'static str, jsonschema::Validator>> = LazyLock::new(|| {
    INSTRUCTIONS
        .definitions
        .iter()
        .map(|d| {
            let schema = Value::Object(d.parameters.clone());
            let validator = jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .build(&schema)
                .expect("the build compiled every definition's parameters");
            (d.name.as_str(), validator)
        })
        .collect()
});

pub fn instructions() -> &'static InstructionSet {
    &INSTRUCTIONS
}

/// A definition by name, or an error naming the closest.
pub fn definition(name: &str) -> Result<&'static Definition, ToolError> {
    instructions().definition(name).map_err(ToolError::NotFound)
}

/// Every way `params` breaks the definition's schema, each with its JSON pointer under `at`.
pub fn parameter_problems(definition: &Definition, params: &Map<String, Value>, at: &str) -> Vec<ArgumentProblem> {
    let Some(validator) = PARAMETER_VALIDATORS.get(definition.name.as_str()) else { return Vec::new() };
    let instance = Value::Object(params.clone());
    validator
        .iter_errors(&instance)
        .map(|e| ArgumentProblem {
            pointer: format!("{at}{}", e.instance_path()),
            message: format!("{e} (definition `{}`: get_definition shows its parameters)", definition.name),
        })
        .collect()
}

/// The handlers (tools.yaml `handler`) whose arguments [`InstructionCheck`] checks; a test
/// holds them to the catalogue.
pub const EXECUTE_INSTRUCTION_HANDLER: &str = "executions::execute_instruction";
pub const EXECUTE_BUNDLE_HANDLER: &str = "executions::execute_bundle";

/// The gate's check of `execute_instruction` and `execute_bundle` before any approval work:
/// the definitions exist and their parameters satisfy their schemas.
pub struct InstructionCheck;

fn step_problems(step: &Value, at: &str, out: &mut Vec<ArgumentProblem>) {
    let Some(name) = step.get("definition").and_then(Value::as_str) else { return };
    match instructions().definition(name) {
        Ok(definition) => {
            let params = step.get("params").and_then(Value::as_object).cloned().unwrap_or_default();
            out.extend(parameter_problems(definition, &params, &format!("{at}/params")));
        }
        Err(message) => out.push(ArgumentProblem { pointer: format!("{at}/definition"), message }),
    }
}

impl ArgumentCheck for InstructionCheck {
    fn problems(&self, tool: &ToolMeta, arguments: &Value) -> Vec<ArgumentProblem> {
        let mut problems = Vec::new();
        match tool.handler {
            EXECUTE_INSTRUCTION_HANDLER => step_problems(arguments, "", &mut problems),
            EXECUTE_BUNDLE_HANDLER => {
                for (i, step) in arguments.get("steps").and_then(Value::as_array).into_iter().flatten().enumerate() {
                    step_problems(step, &format!("/steps/{i}"), &mut problems);
                }
            }
            _ => return problems,
        }
        let (ids, scope) = (arguments.get("agent_ids"), arguments.get("scope"));
        if ids.is_some() == scope.is_some() {
            problems.push(ArgumentProblem {
                pointer: String::new(),
                message: "give exactly one of `agent_ids` (the agents to run on) or `scope` (an expression choosing them); never neither, so nothing runs on the whole fleet by accident".into(),
            });
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every action a manifest declares has code in the agent, and no code lacks a manifest;
    /// an action with a declared plan has the code that plans it, and only those.
    #[test]
    fn the_agent_implements_exactly_the_declared_actions() {
        let mut declared: Vec<(&str, &str, bool)> = instructions()
            .plugins
            .iter()
            .flat_map(|p| p.actions.iter().map(move |a| (p.plugin.as_str(), a.name.as_str(), a.plan.is_some())))
            .collect();
        let mut implemented = toolgate_agent::plugins::implemented();
        declared.sort_unstable();
        implemented.sort_unstable();
        assert_eq!(declared, implemented);
    }

    /// The check keys on handler names: they must be the catalogue's.
    #[test]
    fn the_checked_handlers_are_in_the_catalogue() {
        for handler in [EXECUTE_INSTRUCTION_HANDLER, EXECUTE_BUNDLE_HANDLER] {
            assert!(crate::registry::CATALOGUE.tools.iter().any(|t| t.handler == handler), "{handler}");
        }
    }

    #[test]
    fn every_definition_has_a_compiled_parameter_schema() {
        for d in &instructions().definitions {
            assert!(PARAMETER_VALIDATORS.contains_key(d.name.as_str()), "{}", d.name);
            assert!(!instructions().columns(d).is_empty(), "{}", d.name);
        }
    }
}

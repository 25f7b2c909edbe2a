//! What the gate checks of some tools' arguments beyond their schema, before any approval
//! work, so a person is never asked to approve a call that would fail on them: instructions'
//! definitions and parameters ([`crate::instructions::InstructionCheck`]), and the roles the
//! role-granting tools name (declared in policy.yaml; never a human-only one for an engine).

use serde_json::Value;
use toolgate_domain::aliases::ArgumentAlias;
use toolgate_domain::catalogue::ToolMeta;
use toolgate_domain::denial::ArgumentProblem;
use toolgate_domain::engines::PrincipalKind;
use toolgate_gate::ArgumentCheck;
use toolgate_policy::did_you_mean;

use crate::instructions::InstructionCheck;
use crate::registry::CATALOGUE;

/// The handlers whose `role` argument grants a role; the first always to an engine principal.
pub const ASSIGN_ENGINE_ROLE_HANDLER: &str = "engines::assign_engine_role";
pub const ROLE_GRANTING_HANDLERS: [&str; 3] =
    [ASSIGN_ENGINE_ROLE_HANDLER, "accounts::assign_rbac_role", "groups::assign_management_group_role"];

/// The handlers whose `plugin` and `action` name a kill switch: declared ones only.
pub const KILL_SWITCH_HANDLERS: [&str; 2] =
    ["plugin_config::get_plugin_kill_switch", "plugin_config::set_plugin_kill_switch"];

pub struct ServerChecks;

fn kill_switch_problems(tool: &ToolMeta, arguments: &Value) -> Vec<ArgumentProblem> {
    if !KILL_SWITCH_HANDLERS.contains(&tool.handler) {
        return vec![];
    }
    let plugin = arguments.get("plugin").and_then(Value::as_str).unwrap_or_default();
    let action = arguments.get("action").and_then(Value::as_str).filter(|a| !a.is_empty());
    match crate::instructions::instructions().check_plugin(plugin, action) {
        Ok(_) => vec![],
        Err(message) => {
            let pointer = if message.starts_with("no plugin") { "/plugin" } else { "/action" };
            vec![ArgumentProblem { pointer: pointer.into(), message }]
        }
    }
}

fn role_problems(tool: &ToolMeta, arguments: &Value) -> Vec<ArgumentProblem> {
    if !ROLE_GRANTING_HANDLERS.contains(&tool.handler) {
        return vec![];
    }
    let Some(role) = arguments.get("role").and_then(Value::as_str) else { return vec![] };
    let problem = |message| vec![ArgumentProblem { pointer: "/role".into(), message }];
    if !CATALOGUE.role_names().any(|r| r == role) {
        return problem(format!("no role `{role}` in policy.yaml; {}", did_you_mean(role, CATALOGUE.role_names())));
    }
    let principal = arguments.get("principal_id").and_then(Value::as_str).unwrap_or("the engine principal");
    match tool.handler {
        ASSIGN_ENGINE_ROLE_HANDLER => {
            CATALOGUE.engines.refusal_to_hold(PrincipalKind::Engine, principal, role).map_or_else(Vec::new, problem)
        }
        _ => vec![],
    }
}

impl ArgumentCheck for ServerChecks {
    fn problems(&self, tool: &ToolMeta, arguments: &Value) -> Vec<ArgumentProblem> {
        let mut problems = InstructionCheck.problems(tool, arguments);
        problems.extend(role_problems(tool, arguments));
        problems.extend(kill_switch_problems(tool, arguments));
        problems
    }

    /// The only pairs tools.yaml declares: the reference's `plugin` and `action`, which name
    /// the published definition that runs them (never an action no definition publishes).
    fn resolve_pair(&self, _alias: &ArgumentAlias, plugin: &str, action: &str) -> Result<String, String> {
        let set = crate::instructions::instructions();
        let running: Vec<&str> = set
            .definitions
            .iter()
            .filter(|d| d.plugin == plugin && d.action == action)
            .map(|d| d.name.as_str())
            .collect();
        match running.as_slice() {
            [one] => Ok(one.to_string()),
            [] => Err(match set.check_plugin(plugin, Some(action)) {
                Err(unknown) => unknown,
                Ok(_) => format!(
                    "no published definition runs plugin `{plugin}` action `{action}`; only definitions run \
                     (list_definitions {{\"plugin\": \"{plugin}\"}} shows them)"
                ),
            }),
            several => Err(format!(
                "definitions {} all run plugin `{plugin}` action `{action}`: name one as `definition`",
                several.join(", ")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check keys on handler names: they must be the catalogue's.
    #[test]
    fn the_checked_handlers_are_in_the_catalogue() {
        for handler in ROLE_GRANTING_HANDLERS.into_iter().chain(KILL_SWITCH_HANDLERS) {
            assert!(CATALOGUE.tools.iter().any(|t| t.handler == handler), "{handler}");
        }
    }
}

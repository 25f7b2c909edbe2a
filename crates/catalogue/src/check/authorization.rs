//! tools.yaml `authorization` (docs/catalogue.md, check 15): a deciding check other than the
//! permission one has the conditions it relies on. `durableAdministrator` names policy.yaml's
//! `server.rbac_administrator_role` and is never decided without a person (every tier that
//! allows the tool gates it by approval); `fleetOrGroupOwner` names `server.group_owner_role`
//! and a required string `group_id` argument, the group it judges ownership of. A tool's
//! `precondition` reads required string arguments of its own (`pendingRotation`:
//! `principal_id` and `token_id`).

use super::Inputs;
use crate::diag::Diagnostic;
use crate::model::Authorization;
use crate::policy::{self, Decision};

/// Whether `name` is a required string argument of `schema`.
fn required_string(schema: &serde_json::Map<String, serde_json::Value>, name: &str) -> bool {
    let required = schema.get("required").and_then(|r| r.as_array()).is_some_and(|r| r.iter().any(|n| n == name));
    let string =
        schema.get("properties").and_then(|p| p.get(name)).and_then(|g| g.get("type")).is_some_and(|t| t == "string");
    required && string
}

pub fn check(inputs: &Inputs) -> Vec<Diagnostic> {
    let mut out = preconditions(inputs);
    let policy = &inputs.policy.model;
    let names = &policy.server;
    for (i, tool) in inputs.tools.model.tools.iter().enumerate() {
        match tool.authorization {
            Authorization::Permission | Authorization::FleetWide => {}
            Authorization::DurableAdministrator => {
                if names.rbac_administrator_role.is_none() {
                    out.push(
                        inputs
                            .tool_error(i, "/authorization", "`durableAdministrator` needs policy.yaml `server.rbac_administrator_role`")
                            .help("name the role that must be held fleet-wide, e.g. `rbac_administrator_role: Administrator`"),
                    );
                }
                let ungated: Vec<&str> = policy
                    .tiers
                    .iter()
                    .filter(|t| {
                        let decision = policy::decide(policy, &t.name, &tool.securable, &tool.operation).decision;
                        !matches!(decision, Decision::Deny | Decision::ApprovalRequired)
                    })
                    .map(|t| t.name.as_str())
                    .collect();
                if !ungated.is_empty() {
                    out.push(
                        inputs
                            .tool_error(
                                i,
                                "/authorization",
                                format!(
                                    "`durableAdministrator` grants standing authority, but tier(s) {} allow `{}:{}` without a person's approval",
                                    ungated.join(", "),
                                    tool.securable,
                                    tool.operation
                                ),
                            )
                            .help("gate the pair by `approval` in those tiers (or deny it there), as Security:Write is in `supervised`"),
                    );
                }
            }
            Authorization::FleetOrGroupOwner => {
                if names.group_owner_role.is_none() {
                    out.push(
                        inputs
                            .tool_error(i, "/authorization", "`fleetOrGroupOwner` needs policy.yaml `server.group_owner_role`")
                            .help("name the role a group's service owner holds on it, e.g. `group_owner_role: ITServiceOwner`"),
                    );
                }
                if !required_string(&tool.input_schema, "group_id") {
                    out.push(
                        inputs
                            .tool_error(i, "/inputSchema", "`fleetOrGroupOwner` judges ownership of the group `group_id` names: it must be a required string argument")
                            .help("add `group_id: {type: string, minLength: 1, maxLength: 64}` to `properties` and to `required`"),
                    );
                }
            }
        }
    }
    out
}

/// `planArgument` names an optional boolean argument of the tool's own (required, every call
/// would be a plan and the tool could never act).
fn plan_arguments(inputs: &Inputs) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (i, tool) in inputs.tools.model.tools.iter().enumerate() {
        let Some(name) = &tool.plan_argument else { continue };
        let schema = &tool.input_schema;
        let boolean = schema
            .get("properties")
            .and_then(|p| p.get(name))
            .and_then(|g| g.get("type"))
            .is_some_and(|t| t == "boolean");
        let required = schema.get("required").and_then(|r| r.as_array()).is_some_and(|r| r.iter().any(|n| n == name));
        if !boolean || required {
            out.push(
                inputs
                    .tool_error(
                        i,
                        "/planArgument",
                        format!("`planArgument` names `{name}`: it must be an optional boolean argument"),
                    )
                    .help(format!(
                        "add `{name}: {{type: boolean, default: false}}` to `properties`, not to `required`"
                    )),
            );
        }
    }
    out
}

fn preconditions(inputs: &Inputs) -> Vec<Diagnostic> {
    let mut out = plan_arguments(inputs);
    for (i, tool) in inputs.tools.model.tools.iter().enumerate() {
        let Some(precondition) = tool.precondition else { continue };
        for name in precondition.arguments().iter().filter(|n| !required_string(&tool.input_schema, n)) {
            out.push(
                inputs
                    .tool_error(
                        i,
                        "/precondition",
                        format!(
                            "`{}` reads the argument `{name}`: it must be a required string argument",
                            precondition.key()
                        ),
                    )
                    .help(format!("add `{name}: {{type: string}}` to `properties` and to `required`")),
            );
        }
    }
    out
}

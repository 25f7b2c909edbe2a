//! Work on the agent protocol ([`super::wire`]): the order the server sends
//! ([`super::wire::ServerMessage::Run`]) and the result the agent answers with
//! ([`super::wire::AgentMessage::Result`]).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::instruction::{ActionClass, StepStatus};

/// What to run: ordered steps, each a plugin action with its parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunOrder {
    pub execution_id: String,
    /// Unix ms after which the server no longer waits for the result.
    pub deadline_ms: i64,
    pub steps: Vec<RunStep>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunStep {
    /// The definition's name, for the agent's log.
    pub definition: String,
    pub plugin: String,
    pub action: String,
    pub class: ActionClass,
    /// Allowed while the agent is quarantined.
    pub diagnostic: bool,
    pub params: Map<String, Value>,
    pub timeout_ms: u64,
    /// The plugin secrets its action reads (keys of its plugin's secrets), as the definition
    /// declares them: named in the stored order, never valued there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_names: Vec<String>,
    /// The plugin configuration its action declares it reads (set_plugin_config), valued as
    /// the run is sent to an agent of protocol 3 on: never in the stored order.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub config: std::collections::BTreeMap<String, String>,
    /// Their values, added only to the frame sent to an agent over TLS (docs/secrets.md).
    #[serde(default, skip_serializing_if = "SecretValues::is_empty")]
    pub secrets: SecretValues,
    /// Plan it (compute what it would change, changing nothing) or apply it (protocol 4 on).
    #[serde(default, skip_serializing_if = "StepMode::is_apply")]
    pub mode: StepMode,
    /// The digest ([`plan_digest`]) of the plan a person approved for this agent: the agent
    /// plans again and applies only when its plan is still that one (protocol 4 on). Set
    /// from `approved_plans` as the run is sent to that agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_plan: Option<String>,
    /// Every target's approved plan digest, by agent id: in the stored order only, never sent.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub approved_plans: std::collections::BTreeMap<String, String>,
}

/// What an agent does with a change step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepMode {
    /// Makes the change (checking it against `approved_plan` first, when there is one).
    #[default]
    Apply,
    /// Says what the change would do on this host, changing nothing: a read.
    Plan,
}

impl StepMode {
    pub fn is_apply(&self) -> bool {
        *self == StepMode::Apply
    }
}

/// The digest a plan is approved by: SHA-256 (hex) of its rows as JSON with every object's
/// keys sorted (whatever serde_json's map order in the build), so the agent and the server
/// compute the same one from the same rows.
pub fn plan_digest(rows: &[Map<String, Value>]) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let keys: std::collections::BTreeMap<&String, Value> =
                    map.iter().map(|(k, v)| (k, sorted(v))).collect();
                Value::Object(keys.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    let rows: Vec<Value> = rows.iter().map(|r| sorted(&Value::Object(r.clone()))).collect();
    crate::secrets::sha256_hex(&serde_json::to_string(&rows).unwrap_or_default())
}

/// Plugin secrets' values travelling to an agent: shown by their keys only, in any Debug
/// output, so that no log line can carry one.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SecretValues(pub std::collections::BTreeMap<String, String>);

impl SecretValues {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys().map(|k| format!("{k}=[secret]"))).finish()
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunResult {
    pub execution_id: String,
    /// One per step of the order, in order (steps after a failure are `skipped`).
    pub steps: Vec<StepResult>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepResult {
    pub status: StepStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub rows: Vec<Map<String, Value>>,
}

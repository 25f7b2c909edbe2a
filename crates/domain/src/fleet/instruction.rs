//! Instructions: what the agent's plugins can do (their manifests, kept beside the agent's
//! code) and what the server offers to run (definitions, `instructions.yaml`). The build checks
//! the two against each other and compiles them into one [`InstructionSet`]; these types are
//! both the YAML formats (their JSON Schema feeds the checks) and what the server serves.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use toolgate_policy::did_you_mean;

use super::compare::ValueKind;

/// The plugin configuration key naming the directories an action that writes files may
/// change (comma-separated absolute paths; none when unset). The agent enforces it; the
/// server refuses a path outside it before anything is sent.
pub const ALLOWED_PATHS_KEY: &str = "allowed_paths";

/// Whether the absolute `path` lies under one of the `allowed` directories (the configuration
/// value of [`ALLOWED_PATHS_KEY`]), compared component by component.
pub fn path_allowed(allowed: &str, path: &str) -> bool {
    let path = std::path::Path::new(path);
    allowed.split(',').map(str::trim).filter(|d| d.starts_with('/')).any(|d| path.starts_with(d))
}

/// How an action touches its host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ActionClass {
    /// Reads the host; running it twice is harmless.
    Read,
    /// Changes the host; runs at most once per execution and agent.
    Change,
}

impl ActionClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ActionClass::Read => "read",
            ActionClass::Change => "change",
        }
    }
}

/// One plugin's manifest (`crates/agent/plugins/<plugin>.yaml`): the actions its code implements.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(title = "toolgate agent plugin manifest"))]
#[serde(deny_unknown_fields)]
pub struct PluginManifest {
    /// The plugin's name, `[a-z][a-z0-9_]*`, unique among the manifests.
    pub plugin: String,
    pub description: String,
    pub actions: Vec<Action>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Action {
    /// `[a-z][a-z0-9_]*`, unique within the plugin.
    pub name: String,
    pub description: String,
    pub class: ActionClass,
    /// The parameters the action's code reads; a definition may pass only these.
    #[serde(default)]
    pub params: Vec<ActionParam>,
    /// The columns of every row the action returns.
    pub columns: Vec<ResultColumn>,
    /// A change's plan: the columns of the rows its plan step returns (what it would change
    /// on the host, computed without changing anything). Every change declares one; a read
    /// none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Vec<ResultColumn>>,
    /// The plugin secrets (keys of this plugin's) its code may read; a definition passes
    /// only these (docs/secrets.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<ActionSecret>,
    /// The plugin configuration keys (set_plugin_config) its code reads: their values, as
    /// set when a run is sent, come with every run of it (docs/instructions.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config: Vec<ActionSecret>,
}

/// A named value an action reads: one of its plugin's secrets, or configuration keys.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ActionSecret {
    pub name: String,
    pub description: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ActionParam {
    pub name: String,
    /// `string` or `integer`: the JSON type a definition's schema must give it.
    #[serde(rename = "type")]
    pub kind: ParamKind,
    /// Whether the action cannot run without it (a definition must then require it).
    #[serde(default)]
    pub required: bool,
    pub description: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ParamKind {
    String,
    Integer,
}

impl ParamKind {
    pub fn json_type(self) -> &'static str {
        match self {
            ParamKind::String => "string",
            ParamKind::Integer => "integer",
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ResultColumn {
    pub name: String,
    /// How the column compares in filters and aggregates: text, integer or version.
    #[serde(rename = "type")]
    pub kind: ValueKind,
    pub description: String,
}

/// `instructions.yaml`: the instructions the server offers.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(title = "toolgate instructions.yaml"))]
#[serde(deny_unknown_fields)]
pub struct DefinitionsFile {
    pub definitions: Vec<Definition>,
}

/// One instruction an assistant may run: a plugin action with checked parameters.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Definition {
    /// `[a-z][a-z0-9_]*`, unique; what `execute_instruction` names.
    pub name: String,
    /// What it does and returns, for the model choosing it.
    pub description: String,
    /// The plugin whose manifest declares `action`.
    pub plugin: String,
    pub action: String,
    /// Must be the action's class: a definition never hides a change behind `read`.
    pub class: ActionClass,
    /// JSON Schema (2020-12) of the parameters, root `type: object`; only the action's params.
    pub parameters: Map<String, Value>,
    /// The action's columns this definition returns, in order; all of them when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub columns: Option<Vec<String>>,
    /// How long one agent may take, 1 ms to 1 hour.
    pub timeout_ms: u64,
    /// Allowed on a quarantined agent (read-only definitions only).
    #[serde(default)]
    pub diagnostic: bool,
    /// A change's declaration, shown to the person approving it: what it touches on the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub touches: Option<String>,
    /// A change's declaration: how to undo it, or why it cannot be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo: Option<String>,
    /// The plugin secrets the agent is given for it (among those its action declares); it
    /// runs only over TLS, and not while one of them is unset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
}

/// The checked manifests and definitions the build compiles in.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct InstructionSet {
    pub plugins: Vec<PluginManifest>,
    pub definitions: Vec<Definition>,
}

impl InstructionSet {
    pub fn definition(&self, name: &str) -> Result<&Definition, String> {
        self.definitions.iter().find(|d| d.name == name).ok_or_else(|| {
            let names = self.definitions.iter().map(|d| d.name.as_str());
            format!("no instruction definition `{name}`: {}; list_definitions lists them", did_you_mean(name, names))
        })
    }

    pub fn action(&self, plugin: &str, action: &str) -> Option<&Action> {
        self.plugins.iter().find(|p| p.plugin == plugin)?.actions.iter().find(|a| a.name == action)
    }

    /// The actions of `plugin` that read its configuration key `key`.
    pub fn config_readers(&self, plugin: &str, key: &str) -> Vec<String> {
        let manifest = self.plugins.iter().find(|p| p.plugin == plugin);
        let actions = manifest.into_iter().flat_map(|p| &p.actions);
        actions.filter(|a| a.config.iter().any(|c| c.name == key)).map(|a| format!("{plugin}.{}", a.name)).collect()
    }

    /// The plugin `plugin` (and its action `action`, when given) is declared; else what is
    /// wrong, with the closest declared names.
    pub fn check_plugin(&self, plugin: &str, action: Option<&str>) -> Result<&PluginManifest, String> {
        let Some(manifest) = self.plugins.iter().find(|p| p.plugin == plugin) else {
            let names = self.plugins.iter().map(|p| p.plugin.as_str());
            return Err(format!("no plugin `{plugin}`: {}; discover_plugins lists them", did_you_mean(plugin, names)));
        };
        match action {
            Some(action) if !manifest.actions.iter().any(|a| a.name == action) => {
                let names = manifest.actions.iter().map(|a| a.name.as_str());
                Err(format!("plugin `{plugin}` has no action `{action}`: {}", did_you_mean(action, names)))
            }
            _ => Ok(manifest),
        }
    }

    /// The columns a definition's rows carry, in its order.
    pub fn columns(&self, definition: &Definition) -> Vec<&ResultColumn> {
        let Some(action) = self.action(&definition.plugin, &definition.action) else { return Vec::new() };
        match &definition.columns {
            None => action.columns.iter().collect(),
            Some(names) => names.iter().filter_map(|n| action.columns.iter().find(|c| &c.name == n)).collect(),
        }
    }
}

/// A new execution id: `exe-` and 16 hex digits.
pub fn new_execution_id() -> String {
    format!("exe-{}", crate::secrets::random_hex::<8>())
}

/// Where a whole execution stands, as list_executions filters it: `running` while a target
/// is pending or running, `finished` once every target is in a final state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionState {
    Running,
    Finished,
}

impl ExecutionState {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "running" => Ok(ExecutionState::Running),
            "finished" => Ok(ExecutionState::Finished),
            other => Err(format!("no execution state `{other}`: running or finished")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionState::Running => "running",
            ExecutionState::Finished => "finished",
        }
    }
}

/// Where one agent stands in one execution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetStatus {
    /// Not yet delivered (the agent is offline, or the server has not reached it).
    Pending,
    /// Delivered; no result yet.
    Running,
    Succeeded,
    Failed,
    /// Delivered, but no result came before the deadline (or a step ran past its timeout).
    TimedOut,
    /// Never reached the agent before the deadline.
    Offline,
    /// Cancelled before it was delivered.
    Cancelled,
    /// The server would not send it: it changes something and the agent is quarantined
    /// (the target's error says so).
    Refused,
    /// Changed nothing: its plan was no longer the approved one (its rows are the new plan).
    PlanChanged,
    /// Never sent: its wave was not released (the rollout's failure budget was spent, a kill
    /// switch stopped it, or the deadline came first; the target's error says which).
    Skipped,
}

impl TargetStatus {
    pub const ALL: [TargetStatus; 10] = [
        TargetStatus::Pending,
        TargetStatus::Running,
        TargetStatus::Succeeded,
        TargetStatus::Failed,
        TargetStatus::TimedOut,
        TargetStatus::Offline,
        TargetStatus::Cancelled,
        TargetStatus::Refused,
        TargetStatus::PlanChanged,
        TargetStatus::Skipped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TargetStatus::Pending => "pending",
            TargetStatus::Running => "running",
            TargetStatus::Succeeded => "succeeded",
            TargetStatus::Failed => "failed",
            TargetStatus::TimedOut => "timed_out",
            TargetStatus::Offline => "offline",
            TargetStatus::Cancelled => "cancelled",
            TargetStatus::Refused => "refused",
            TargetStatus::PlanChanged => "plan_changed",
            TargetStatus::Skipped => "skipped",
        }
    }

    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL.into_iter().find(|t| t.as_str() == s).ok_or_else(|| {
            let names = Self::ALL.map(TargetStatus::as_str);
            format!("no status `{s}`: {}", did_you_mean(s, names.iter().copied()))
        })
    }

    pub fn is_final(self) -> bool {
        !matches!(self, TargetStatus::Pending | TargetStatus::Running)
    }
}

/// How one step ended on one agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Succeeded,
    Failed,
    TimedOut,
    /// Not run: an earlier step of the bundle failed.
    Skipped,
    /// Not applied: the agent's plan is no longer the one a person approved (its rows are
    /// the new plan).
    PlanChanged,
}

impl StepStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Succeeded => "succeeded",
            StepStatus::Failed => "failed",
            StepStatus::TimedOut => "timed_out",
            StepStatus::Skipped => "skipped",
            StepStatus::PlanChanged => "plan_changed",
        }
    }
}

/// The agent-level status of a finished run: its first unsuccessful step decides.
pub fn target_status(steps: &[StepStatus]) -> TargetStatus {
    match steps.iter().find(|s| **s != StepStatus::Succeeded) {
        None => TargetStatus::Succeeded,
        Some(StepStatus::TimedOut) => TargetStatus::TimedOut,
        Some(StepStatus::PlanChanged) => TargetStatus::PlanChanged,
        Some(_) => TargetStatus::Failed,
    }
}

//! Every rule that ties tools.yaml and policy.yaml together. Each family of rules lives in
//! its own file as a function from the parsed files to diagnostics; `run` collects them all,
//! so one build reports every problem.

mod aliases;
mod authorization;
mod coverage;
mod engines;
pub mod handler_scan;
pub mod handlers;
mod hints;
pub(crate) mod keywords;
mod names;
pub mod pages;
mod prompts_resources;
mod refs;
mod retry;
mod schemas;
mod scopes;
mod sensitive;
pub mod toolsets;

use serde_json::{Map, Value};

use crate::diag::Diagnostic;
use crate::load::Parsed;
use crate::model::{Catalogue, OperationClass, Policy, Tool};
use crate::policy::{self, Decision};
use crate::source::Pos;

pub use handlers::{Handler, expected_signature};
pub use prompts_resources::{PairPlan, PromptResourcePlans};
pub use schemas::APPROVAL_ID;

/// The two parsed files, and helpers to point into them.
pub struct Inputs<'a> {
    pub tools: &'a Parsed<Catalogue>,
    pub policy: &'a Parsed<Policy>,
}

impl Inputs<'_> {
    pub fn tool(&self, index: usize) -> &Tool {
        &self.tools.model.tools[index]
    }

    /// The position of `/tools/<index><sub>`: its key when `sub` names one, else the entry.
    /// Where tool `index` of the model sits in the YAML (entries set aside shift the rest).
    fn source_index(&self, index: usize) -> usize {
        self.tools.tool_sources.get(index).copied().unwrap_or(index)
    }

    pub fn tool_pos(&self, index: usize, sub: &str) -> Pos {
        self.tools.map.key(&format!("/tools/{}{sub}", self.source_index(index)))
    }

    pub fn tool_value_pos(&self, index: usize, sub: &str) -> Pos {
        self.tools.map.value(&format!("/tools/{}{sub}", self.source_index(index)))
    }

    pub fn tool_error(&self, index: usize, sub: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic::error(&self.tools.file.name, self.tool_pos(index, sub), message).tool(&self.tool(index).name)
    }

    pub fn tool_warning(&self, index: usize, sub: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic::warning(&self.tools.file.name, self.tool_pos(index, sub), message).tool(&self.tool(index).name)
    }

    pub fn policy_error(&self, pointer: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic::error(&self.policy.file.name, self.policy.map.value(pointer), message)
    }

    pub fn policy_warning(&self, pointer: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic::warning(&self.policy.file.name, self.policy.map.value(pointer), message)
    }

    pub fn class_of(&self, operation: &str) -> Option<OperationClass> {
        self.policy.model.operations.get(operation).copied()
    }
}

/// What the emitters need to know about one tool, worked out once.
#[derive(Clone, Debug)]
pub struct ToolPlan {
    pub class: OperationClass,
    /// One decision per tier, in policy.yaml's tier order.
    pub decisions: Vec<Decision>,
    pub approval_gated: bool,
    /// The inputSchema as served: the author's, plus `approval_id` when gated.
    pub published_input_schema: Map<String, Value>,
    pub handler: Handler,
    /// The typed argument struct's name, `args::<struct_name>`.
    pub struct_name: String,
    /// A minimal valid `arguments` object (required fields only), when one could be made.
    pub example: Option<Value>,
    /// JSON pointers of the arguments marked `writeOnly: true` (redacted wherever echoed).
    pub sensitive: Vec<String>,
    /// The `retry_after_ms` of a transient store fault (policy.yaml `store_fault_retry`).
    pub store_fault_retry_ms: u64,
}

/// The files after every check passed; warnings ride along.
pub struct Checked {
    pub tools: Parsed<Catalogue>,
    pub policy: Parsed<Policy>,
    pub plans: Vec<ToolPlan>,
    /// Prompts, resources and templates: their pairs and decisions.
    pub prompts_resources: PromptResourcePlans,
    pub warnings: Vec<Diagnostic>,
    /// Handler files read, for `cargo::rerun-if-changed`.
    pub handler_files: Vec<std::path::PathBuf>,
}

/// Runs every rule. `Err` holds the errors and warnings; `Ok` holds the warnings.
pub fn run(
    mut tools: Parsed<Catalogue>,
    policy: Parsed<Policy>,
    rust_handlers: Option<&dyn handlers::RustHandlers>,
) -> Result<Checked, Vec<Diagnostic>> {
    let mut diagnostics = pages::check(&Inputs { tools: &tools, policy: &policy });
    if diagnostics.is_empty() {
        // Every other rule, and everything emitted, sees the schemas as served.
        pages::expand(&mut tools.model.tools);
    }
    let inputs = Inputs { tools: &tools, policy: &policy };
    diagnostics.extend(names::check(&inputs));
    diagnostics.extend(refs::check(&inputs));
    diagnostics.extend(hints::check(&inputs));
    diagnostics.extend(schemas::check(&inputs));
    diagnostics.extend(coverage::check(&inputs));
    diagnostics.extend(sensitive::check(&inputs));
    diagnostics.extend(retry::check(&inputs));
    diagnostics.extend(authorization::check(&inputs));
    diagnostics.extend(aliases::check(&inputs));
    diagnostics.extend(engines::check(&inputs));
    diagnostics.extend(scopes::check(&inputs));
    diagnostics.extend(toolsets::check(&inputs));
    let (entry_diagnostics, prompts_resources) = prompts_resources::check(&inputs);
    diagnostics.extend(entry_diagnostics);
    let handler_report = handlers::check(&inputs, rust_handlers);
    diagnostics.extend(handler_report.diagnostics);

    let struct_names = crate::args::struct_names(&tools.model.tools);
    let plans: Vec<ToolPlan> =
        (0..tools.model.tools.len()).map(|i| plan(&inputs, i, &handler_report.handlers[i], &struct_names[i])).collect();
    diagnostics.extend(schemas::check_argument_types(&inputs, &plans));
    diagnostics.extend(toolsets::budget(&inputs, &plans));
    crate::diag::sort(&mut diagnostics);
    if diagnostics.iter().any(Diagnostic::is_error) {
        return Err(diagnostics);
    }
    Ok(Checked { tools, policy, plans, prompts_resources, warnings: diagnostics, handler_files: handler_report.files })
}

fn plan(inputs: &Inputs, index: usize, handler: &Handler, struct_name: &str) -> ToolPlan {
    let tool = inputs.tool(index);
    let policy = &inputs.policy.model;
    let decisions: Vec<Decision> = policy
        .tiers
        .iter()
        .map(|tier| policy::decide(policy, &tier.name, &tool.securable, &tool.operation).decision)
        .collect();
    let approval_gated = decisions.contains(&Decision::ApprovalRequired);
    let published_input_schema = schemas::published(&tool.input_schema, approval_gated);
    ToolPlan {
        class: inputs.class_of(&tool.operation).unwrap_or(OperationClass::Write),
        decisions,
        approval_gated,
        example: schemas::example(&tool.input_schema),
        sensitive: sensitive::scan(&tool.input_schema).0,
        store_fault_retry_ms: retry::hint_ms(policy, &tool.securable, &tool.operation),
        published_input_schema,
        handler: handler.clone(),
        struct_name: struct_name.to_string(),
    }
}

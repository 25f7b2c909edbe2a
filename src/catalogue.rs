//! The types the generated registry is made of. The values live in `registry` (generated).

// Policy is evaluated by one crate at build time and at run time.
pub use toolgate_policy::{Decision, OperationClass, Pattern, Permission, RoleGrants, TierRules};

/// The four MCP hints, always explicit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Annotations {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HintOverride {
    pub hint: &'static str,
    pub reason: &'static str,
}

/// One tool's metadata; JSON fields hold the exact bytes served.
#[derive(Debug)]
pub struct ToolMeta {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub securable: &'static str,
    pub operation: &'static str,
    pub class: OperationClass,
    pub annotations: Annotations,
    pub hint_override: Option<HintOverride>,
    pub handler: &'static str,
    /// The published inputSchema (with `approval_id` when gated).
    pub input_schema: &'static str,
    pub output_schema: Option<&'static str>,
    /// Client capabilities a call needs, as a `ClientCapabilities` JSON object.
    pub required_client_capabilities: Option<&'static str>,
    /// A minimal valid `arguments` object, made at build time.
    pub example_arguments: Option<&'static str>,
    /// The CallToolResult of a `builtin::static` tool.
    pub static_result: Option<&'static str>,
    pub approval_gated: bool,
}

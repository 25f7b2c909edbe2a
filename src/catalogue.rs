//! The types the generated registry is made of. The values live in `registry` (generated).

// The build-time types are the runtime's too: one definition each.
pub use toolgate_codegen::model::OperationClass;
pub use toolgate_codegen::policy::Decision;

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

/// `Securable:Operation` with `None` for `*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pattern {
    pub securable: Option<&'static str>,
    pub operation: Option<&'static str>,
}

impl Pattern {
    pub fn matches(&self, securable: &str, operation: &str) -> bool {
        self.securable.is_none_or(|s| s == securable) && self.operation.is_none_or(|o| o == operation)
    }

    pub fn text(&self) -> String {
        format!("{}:{}", self.securable.unwrap_or("*"), self.operation.unwrap_or("*"))
    }
}

#[derive(Debug)]
pub struct TierRules {
    pub name: &'static str,
    pub allow: &'static [Pattern],
    pub approval: &'static [Pattern],
}

#[derive(Debug)]
pub struct RoleGrants {
    pub name: &'static str,
    pub grants: &'static [Pattern],
}

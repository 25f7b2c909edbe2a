//! The types that *are* the two YAML formats. The editor schemas in `schemas/` and the
//! structural checks (unknown keys, missing keys, wrong types) are both derived from these.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `tools.yaml`: every tool the server offers.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "toolgate tools.yaml")]
pub struct Catalogue {
    /// The groups a client chooses its tool list by (docs/toolsets.md). When any is declared,
    /// every tool names exactly one in `toolset`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toolsets: Vec<ToolsetSpec>,
    /// The tools, in the order `tools/list` serves them.
    pub tools: Vec<Tool>,
    /// The prompts, in the order `prompts/list` serves them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prompts: Vec<PromptSpec>,
    /// Resources with a fixed URI, in the order `resources/list` serves them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceSpec>,
    /// URI templates, in the order `resources/templates/list` serves them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_templates: Vec<TemplateSpec>,
}

/// One toolset: a group of tools a client may choose to see.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolsetSpec {
    /// 1-32 characters of `[a-z0-9_]`, unique; `all`, `default` and `dynamic` are the choices'
    /// own words and cannot name a toolset.
    pub name: String,
    /// The display name.
    pub title: String,
    /// One line: what an administrator does with these tools.
    pub description: String,
    /// Listed in every choice, `dynamic` included: the tools a client finds the others with.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub core: bool,
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Tool {
    /// 1-128 characters of `[A-Za-z0-9_.-]`, unique in the catalogue.
    pub name: String,
    /// The display name clients show.
    pub title: String,
    /// What the tool does, for the model choosing it. Must not contradict the hints.
    pub description: String,
    /// The RBAC securable (declared in policy.yaml `securables`).
    pub securable: String,
    /// The RBAC operation (declared in policy.yaml `operations`); its class fixes the hints.
    pub operation: String,
    /// All four MCP hints, always explicit: a missing hint means the unsafe default.
    pub annotations: Annotations,
    /// Waives one class-derived hint rule, with the reason a reviewer reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint_override: Option<HintOverride>,
    /// JSON Schema 2020-12 for the arguments, served verbatim; root `type: object`.
    pub input_schema: Map<String, Value>,
    /// JSON Schema 2020-12 for `structuredContent`; optional only for `builtin::static`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Map<String, Value>>,
    /// `area::function` under `src/handlers/`, or `builtin::echo` / `builtin::static`.
    pub handler: String,
    /// Client capabilities a call needs (2026-07-28 `clientCapabilities` shape), e.g. `{sampling: {}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_client_capabilities: Option<Map<String, Value>>,
    /// 2026-07-28 tasks extension: `optional` (the handler may start a task), `required`
    /// (only as a task). Default `forbidden`.
    #[serde(default, skip_serializing_if = "TaskSupport::is_forbidden")]
    pub task_support: TaskSupport,
    /// The result carries text the agents reported (host names, inventory rows, instruction
    /// output, compliance evidence): its text block is wrapped as untrusted data, its `_meta`
    /// says so, and every prompt that calls the tool tells the model to treat it as data.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub agent_data: bool,
    /// How the gate decides RBAC: `permission` (the default), `durableAdministrator` or
    /// `fleetOrGroupOwner` (docs/catalogue.md). The build checks each one's conditions.
    #[serde(default, skip_serializing_if = "Authorization::is_permission")]
    pub authorization: Authorization,
    /// What the gate checks of the live state before it mints or consumes the tool's ticket:
    /// `pendingRotation` (docs/catalogue.md). The build checks the arguments it reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precondition: Option<Precondition>,
    /// A boolean argument that, when true, makes the call a plan: it changes nothing, so the
    /// gate asks for no approval and no confirmation (the tier and the roles still decide).
    /// The build checks it is an optional boolean argument (docs/catalogue.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_argument: Option<String>,
    /// The reference surface's names for some arguments, accepted for the tool's own
    /// (docs/catalogue.md). Not published: the tool list names each argument once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<AliasSpec>,
    /// The array of the answer that pages (docs/catalogue.md): the build adds the `cursor`
    /// argument and the answer's `next_cursor` and `remaining`, the same for every listing tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages: Option<String>,
    /// The toolset it belongs to (declared under `toolsets`): required when any is declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolset: Option<String>,
    /// Words an administrator might use for what the tool does that its title, description
    /// and argument names do not say (`find_tools` matches them; never published).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    /// The fixed result of a `builtin::static` tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<StaticResult>,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[allow(non_snake_case)]
pub struct Annotations {
    pub readOnlyHint: bool,
    pub destructiveHint: bool,
    pub idempotentHint: bool,
    pub openWorldHint: bool,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum OverridableHint {
    #[serde(rename = "destructiveHint")]
    Destructive,
    #[serde(rename = "idempotentHint")]
    Idempotent,
}

impl OverridableHint {
    pub fn key(self) -> &'static str {
        match self {
            OverridableHint::Destructive => "destructiveHint",
            OverridableHint::Idempotent => "idempotentHint",
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HintOverride {
    /// The hint whose class-derived rule is waived for this tool.
    pub hint: OverridableHint,
    /// Why the usual rule does not fit this tool.
    pub reason: String,
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StaticResult {
    pub content: Vec<ContentBlock>,
    #[serde(default)]
    pub is_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
}

/// An MCP content block, written as it goes on the wire.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ContentBlock {
    Text {
        text: String,
    },
    Image {
        /// base64
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    Audio {
        /// base64
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    Resource {
        resource: EmbeddedResource,
    },
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EmbeddedResource {
    pub uri: String,
    #[serde(rename = "mimeType", default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// base64
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

/// `policy.yaml`: securables, operations, tiers and roles.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "toolgate policy.yaml")]
pub struct Policy {
    /// The closed list of securables tools may name.
    pub securables: Vec<String>,
    /// Securables whose objects are the whole fleet's (plugin configuration, say): a role on a
    /// management group grants nothing on them, only a fleet-wide role does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fleet_only: Vec<String>,
    /// The closed list of operations, each with its class.
    pub operations: std::collections::BTreeMap<String, OperationClass>,
    /// MCP tiers in the order reports show them. A token's tier that is not listed allows nothing.
    pub tiers: Vec<TierDef>,
    /// RBAC roles: sets of `Securable:Operation` permissions.
    pub roles: Vec<RoleDef>,
    /// The names the server itself relies on; the build checks each one against the above.
    pub server: ServerNames,
    /// How long a client is told to wait after a transient store fault (the refusal envelope's `retry_after_ms`).
    pub store_fault_retry: StoreFaultRetry,
    /// Engine principals (automation's identities): what they may never hold and how much
    /// they may ask. Absent: no role is human-only, no permission administrator-class, and
    /// the default quota applies.
    #[serde(default)]
    pub engines: EnginePolicy,
    /// Access reviews (docs/identities.md). Absent: closing needs every grant decided.
    #[serde(default)]
    pub access_reviews: AccessReviewPolicy,
}

/// How access review campaigns close.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AccessReviewPolicy {
    /// Whether a campaign may close while some grants have no decision (they are listed either
    /// way, and kept as they are).
    #[serde(default)]
    pub close_with_undecided: bool,
}

/// Engine principals' limits (docs/identities.md).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnginePolicy {
    /// Roles an engine principal may never hold, fleet-wide or on a group.
    #[serde(default)]
    pub human_only_roles: Vec<String>,
    /// `Securable:Operation` patterns that make a grant administrator-class. Every role
    /// granting one must be human-only; `audit_engine_no_admin` lists the engine principals
    /// that hold one all the same (granted before the policy said so).
    #[serde(default)]
    pub administrator_permissions: Vec<String>,
    /// What each engine principal may ask of one server unless its own record says otherwise.
    #[serde(default)]
    pub quota: QuotaDefaults,
    /// The tier of a credential minted without one (`mint_engine_credential`'s `tier`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_tier: Option<String>,
}

/// An engine principal's quota on one server: counted per replica, as the seeds count it.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuotaDefaults {
    /// Requests per minute (a token bucket refilling continuously), 1 to 100000.
    pub requests_per_minute: u32,
    /// Requests in flight at once (a stream holds its slot while it lasts), 1 to 10000.
    pub concurrent_requests: u32,
}

impl Default for QuotaDefaults {
    fn default() -> Self {
        QuotaDefaults { requests_per_minute: 600, concurrent_requests: 8 }
    }
}

/// The retry hint of a store fault: one default, and families of tools priced apart.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreFaultRetry {
    /// For every tool no family names, in milliseconds.
    pub default_ms: u64,
    /// Tools whose faults clear sooner (or later); a tool is in at most one family.
    #[serde(default)]
    pub families: Vec<RetryFamily>,
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryFamily {
    /// What the family is, for the reader (and the build's messages).
    pub name: String,
    /// Its hint, in milliseconds.
    pub ms: u64,
    /// `Securable:Operation` patterns of the tools in it; each must match at least one tool.
    pub pairs: Vec<String>,
}

/// What the server's own code needs to know by name, declared here rather than in Rust.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerNames {
    /// The role of the principal `admin` that the first start creates.
    pub first_start_role: String,
    /// The tier of the demo token the first start prints.
    pub demo_token_tier: String,
    /// The permission (`Securable:Operation`, no `*`) a person needs to decide approvals and
    /// to hold an administrator API credential.
    pub reviewer_permission: String,
    /// The permission that lets a principal revoke other principals' API tokens.
    pub principal_admin_permission: String,
    /// The role of a management group's service owner: held on a group, it lets its holder
    /// change the membership tags that group's rule reads and manage the roles held on it.
    /// Absent: no role owns a group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_owner_role: Option<String>,
    /// The role a principal must hold fleet-wide, read fresh from the store, for the tools
    /// whose `authorization` is `durableAdministrator` (granting fleet-wide roles). Absent: no
    /// tool may declare that check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rbac_administrator_role: Option<String>,
}

pub use toolgate_domain::aliases::AliasSpec;
pub use toolgate_domain::catalogue::{Authorization, Precondition, TaskSupport};
pub use toolgate_domain::prompts_resources::{PromptSpec, ResourceSpec, TemplateSpec};
pub use toolgate_policy::OperationClass;

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TierDef {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The OAuth scope that gives an access token this tier (docs/sign-in.md), e.g.
    /// `toolgate:readonly`. Absent: no OAuth token can have it. A token carries exactly one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// `Securable:Operation` patterns this tier may call (`*` stands for a whole side).
    #[serde(default)]
    pub allow: Vec<Rule>,
    /// Patterns among the allowed ones that need a human's approval first.
    #[serde(default)]
    pub approval: Vec<Rule>,
    /// The toolsets a client of this tier sees when neither its credential nor its request
    /// chooses (tools.yaml `toolsets`; the core ones always). Absent: every toolset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toolsets: Vec<String>,
    /// Patterns among the allowed ones that need no approval but run only once the client's
    /// own user confirms (elicitation, or 2026-07-28's input_required): a safety net, never
    /// a person's approval. A pair may not need both.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub confirm: Vec<Rule>,
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoleDef {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `Securable:Operation` patterns this role grants.
    #[serde(default)]
    pub permissions: Vec<Rule>,
    /// Roles whose permissions this role also grants.
    #[serde(default)]
    pub includes: Vec<String>,
}

/// A `Securable:Operation` pattern, optionally marked as knowingly unused today.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Rule {
    Plain(String),
    Expected {
        pair: String,
        /// Why the rule stays although no tool matches it yet; silences that warning.
        expect_unused: String,
    },
}

impl Rule {
    pub fn pattern(&self) -> &str {
        match self {
            Rule::Plain(p) => p,
            Rule::Expected { pair, .. } => pair,
        }
    }

    pub fn expects_unused(&self) -> bool {
        matches!(self, Rule::Expected { .. })
    }
}

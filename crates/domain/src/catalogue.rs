//! The types the generated registry is made of (the values are generated from tools.yaml and
//! policy.yaml into the server crate), and the lookups every layer makes over them.

use toolgate_policy::{Decision, OperationClass, Permission, RoleGrants, TierRules};

/// The four MCP hints, always explicit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Annotations {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

/// Whether a tool runs as a task of the 2026-07-28 tasks extension
/// (`io.modelcontextprotocol/tasks`): never (the default), when its handler starts one, or
/// only so (a client without the extension gets -32021).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum TaskSupport {
    #[default]
    Forbidden,
    Optional,
    Required,
}

impl TaskSupport {
    pub fn is_forbidden(&self) -> bool {
        *self == TaskSupport::Forbidden
    }

    /// The variant's name, as generated code spells it.
    pub fn variant(self) -> &'static str {
        match self {
            TaskSupport::Forbidden => "Forbidden",
            TaskSupport::Optional => "Optional",
            TaskSupport::Required => "Required",
        }
    }
}

// What the gate checks against the live state before it mints or consumes a tool's ticket
// (tools.yaml `precondition`; docs/catalogue.md). Failing, the call is refused and any ticket
// it names stays unconsumed and recallable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum Precondition {
    /// The credential rotation the call names is still pending: `token_id` is the successor
    /// of a rotation of `principal_id`'s that is neither confirmed nor past its overlap.
    PendingRotation,
    /// `owner_username` names a person: a principal that exists and is not an engine.
    PersonOwner,
    /// The agent `agent_id` names can cut its network, unless the call asks for `mode: soft`.
    QuarantineEnforceable,
}

impl Precondition {
    /// The variant's name, as generated code spells it.
    pub fn variant(self) -> &'static str {
        match self {
            Precondition::PendingRotation => "PendingRotation",
            Precondition::PersonOwner => "PersonOwner",
            Precondition::QuarantineEnforceable => "QuarantineEnforceable",
        }
    }

    /// Its name in tools.yaml.
    pub fn key(self) -> &'static str {
        match self {
            Precondition::PendingRotation => "pendingRotation",
            Precondition::PersonOwner => "personOwner",
            Precondition::QuarantineEnforceable => "quarantineEnforceable",
        }
    }

    /// What it checks, for `toolgate explain`.
    pub fn explained(self) -> &'static str {
        match self {
            Precondition::PendingRotation => {
                "the rotation `token_id` names is `principal_id`'s, still pending (neither confirmed nor past its \
                 overlap), and `secret` is its successor's; checked before any ticket is minted or consumed, so a \
                 refused recall keeps its ticket"
            }
            Precondition::PersonOwner => {
                "`owner_username` names a principal that exists and is a person, not an engine; checked before any \
                 ticket is minted, so a reviewer is never asked to approve what cannot be done"
            }
            Precondition::QuarantineEnforceable => {
                "the agent `agent_id` names said it can cut its host's network (it runs as root with \
                 --allow-network-isolation), unless the call asks for `mode: soft`; checked before any ticket is minted"
            }
        }
    }

    /// The arguments it reads: each a required string argument of the tool (checked by the build).
    pub fn arguments(self) -> &'static [&'static str] {
        match self {
            Precondition::PendingRotation => &["principal_id", "token_id"],
            Precondition::PersonOwner => &["owner_username"],
            Precondition::QuarantineEnforceable => &["agent_id"],
        }
    }
}

// How the gate decides RBAC for a tool (tools.yaml `authorization`; docs/catalogue.md).
// (A plain comment: a doc comment would become a description in the committed schema.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum Authorization {
    /// The caller's roles grant the tool's pair: fleet-wide, or on groups (the call is then
    /// confined to their agents).
    #[default]
    Permission,
    /// The pair drives the tier and the approval only; what decides is policy.yaml
    /// `server.rbac_administrator_role` held fleet-wide, read fresh from the store (a cached
    /// credential is not trusted to grant standing authority).
    DurableAdministrator,
    /// The pair granted fleet-wide, or policy.yaml `server.group_owner_role` held on the
    /// group the call's `group_id` names (or on one of its ancestors).
    FleetOrGroupOwner,
    /// The pair granted fleet-wide only: the tool acts on what belongs to the whole fleet (the
    /// key-encryption key, the CA, engine principals), not on one group's agents, so a role
    /// on a management group grants nothing. Per tool, where policy.yaml `fleet_only` is per
    /// securable: the reference pins these tools to `Security`, which also covers one group's
    /// quarantine and certificates.
    FleetWide,
}

impl Authorization {
    pub fn is_permission(&self) -> bool {
        *self == Authorization::Permission
    }

    /// The variant's name, as generated code spells it.
    pub fn variant(self) -> &'static str {
        match self {
            Authorization::Permission => "Permission",
            Authorization::DurableAdministrator => "DurableAdministrator",
            Authorization::FleetOrGroupOwner => "FleetOrGroupOwner",
            Authorization::FleetWide => "FleetWide",
        }
    }

    /// What `toolgate explain` says decides a call.
    pub fn explained(self) -> &'static str {
        match self {
            Authorization::Permission => {
                "the principal's roles grant the pair (fleet-wide, or on groups: confined to them)"
            }
            Authorization::DurableAdministrator => {
                "a durable administrator role (policy.yaml server.rbac_administrator_role), held fleet-wide and re-read \
                 from the store, instead of the permission check; the pair drives only the tier and the approval"
            }
            Authorization::FleetOrGroupOwner => {
                "the pair granted fleet-wide, or the group owner role (policy.yaml server.group_owner_role) on the \
                 group `group_id` names or one of its ancestors"
            }
            Authorization::FleetWide => {
                "the principal's fleet-wide roles grant the pair; a role on a management group grants nothing here \
                 (the tool acts on what belongs to the whole fleet)"
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HintOverride {
    pub hint: &'static str,
    pub reason: &'static str,
}

/// One tool's metadata; JSON fields hold the exact bytes served.
#[derive(Debug)]
pub struct ToolMeta {
    /// Its position in tools.yaml (and in every per-tool table).
    pub index: usize,
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
    /// Whether it runs as a task (2026-07-28 tasks extension).
    pub task_support: TaskSupport,
    /// A minimal valid `arguments` object, made at build time.
    pub example_arguments: Option<&'static str>,
    /// The CallToolResult of a `builtin::static` tool.
    pub static_result: Option<&'static str>,
    pub approval_gated: bool,
    /// The build-time decision at each tier, in policy.yaml's order (its matrix row).
    pub decisions: &'static [Decision],
    /// JSON pointers of the arguments marked `writeOnly: true`: redacted wherever echoed.
    pub sensitive_arguments: &'static [&'static str],
    /// Its result carries text the agents reported: marked untrusted wherever it is shown
    /// (tools.yaml `agentData`).
    pub agent_data: bool,
    /// The array of its answer that pages (tools.yaml `pages`): the rows a page holds.
    pub pages: Option<&'static str>,
    /// The `retry_after_ms` a transient store fault answers with (policy.yaml
    /// `store_fault_retry`: the seeds' 5 s, and 2 s for the plugin-config and token-rotation
    /// families).
    pub store_fault_retry_ms: u64,
    /// How the gate decides RBAC (tools.yaml `authorization`).
    pub authorization: Authorization,
    /// What the gate checks of the live state before a ticket (tools.yaml `precondition`).
    pub precondition: Option<Precondition>,
    /// The boolean argument that makes a call a plan, which needs no approval (tools.yaml
    /// `planArgument`).
    pub plan_argument: Option<&'static str>,
    /// The reference surface's names for some of its arguments (tools.yaml `aliases`),
    /// rewritten by the gate before the schema check.
    pub aliases: &'static [crate::aliases::ArgumentAlias],
    /// Its toolset's index in [`Catalogue::toolsets`] (None: the catalogue declares none).
    pub toolset: Option<u8>,
    /// tools.yaml `keywords`: more words `find_tools` matches.
    pub keywords: &'static [&'static str],
}

impl ToolMeta {
    pub fn pair(&self) -> String {
        format!("{}:{}", self.securable, self.operation)
    }
}

/// A prompt, resource or resource template: the pair it is gated by, its decisions, and the
/// tools.yaml entry as JSON (a [`crate::prompts_resources`] spec).
#[derive(Debug)]
pub struct PromptResourceMeta {
    pub name: &'static str,
    pub securable: &'static str,
    pub operation: &'static str,
    /// The build-time decision at each tier (Allow or Deny: the pair is read-class).
    pub decisions: &'static [Decision],
    pub spec: &'static str,
}

impl PromptResourceMeta {
    pub fn pair(&self) -> String {
        format!("{}:{}", self.securable, self.operation)
    }
}

/// The whole generated catalogue: tools, tiers, roles and the names the server relies on.
#[derive(Debug)]
pub struct Catalogue {
    pub tools: &'static [ToolMeta],
    pub prompts: &'static [PromptResourceMeta],
    pub resources: &'static [PromptResourceMeta],
    pub templates: &'static [PromptResourceMeta],
    pub tiers: &'static [TierRules],
    pub roles: &'static [RoleGrants],
    /// policy.yaml `securables`.
    pub securables: &'static [&'static str],
    /// policy.yaml `fleet_only`: securables a role on a group grants nothing on.
    pub fleet_only: &'static [&'static str],
    /// policy.yaml `operations`, with their classes.
    pub operations: &'static [(&'static str, OperationClass)],
    /// policy.yaml `server.reviewer_permission`.
    pub reviewer: Permission,
    /// policy.yaml `server.principal_admin_permission`.
    pub principal_admin: Permission,
    /// policy.yaml `server.group_owner_role`: held on a group, its service owner's.
    pub group_owner_role: Option<&'static str>,
    /// policy.yaml `server.rbac_administrator_role`: what `durableAdministrator` tools require.
    pub rbac_administrator_role: Option<&'static str>,
    /// policy.yaml `engines`.
    pub engines: crate::engines::EngineRules,
    /// policy.yaml `access_reviews.close_with_undecided`.
    pub close_reviews_with_undecided: bool,
    /// tools.yaml `toolsets`, in its order.
    pub toolsets: &'static [crate::toolsets::ToolsetMeta],
    /// Each tier's default toolsets (policy.yaml `tiers[].toolsets`, the core ones included).
    pub tier_toolsets: &'static [crate::toolsets::Toolsets],
}

impl Catalogue {
    /// A tool's decision at a tier; no tier (an undeclared name) denies.
    pub fn decision(&self, tool: &ToolMeta, tier: Option<&TierRules>) -> Decision {
        tier.map_or(Decision::Deny, |t| tool.decisions[t.index])
    }

    /// The tier policy.yaml declares under `name`.
    pub fn tier(&self, name: &str) -> Option<&'static TierRules> {
        self.tiers.iter().find(|t| t.name == name)
    }

    pub fn tier_names(&self) -> impl Iterator<Item = &'static str> + Clone {
        self.tiers.iter().map(|t| t.name)
    }

    pub fn role_names(&self) -> impl Iterator<Item = &'static str> + Clone {
        self.roles.iter().map(|r| r.name)
    }

    /// RBAC: one of `roles` grants `securable:operation`.
    pub fn permits(&self, roles: &[String], securable: &str, operation: &str) -> bool {
        toolgate_policy::permits(self.roles, roles, securable, operation)
    }

    /// RBAC with groups: which agents `principal` may use `securable:operation` on. The whole
    /// fleet through a fleet-wide role (or a role on the root); the groups whose roles grant
    /// it; `None` when nothing does.
    pub fn reach(
        &self,
        principal: &crate::Principal,
        securable: &str,
        operation: &str,
    ) -> Option<crate::groups::Reach> {
        use crate::groups::{ROOT_GROUP, Reach};
        if self.permits(&principal.roles, securable, operation) {
            return Some(Reach::Fleet);
        }
        if self.fleet_only.contains(&securable) {
            return None;
        }
        let mut groups: Vec<String> = principal
            .group_roles
            .iter()
            .filter(|held| self.permits(std::slice::from_ref(&held.role), securable, operation))
            .map(|held| held.group_id.clone())
            .collect();
        groups.sort();
        groups.dedup();
        match groups.as_slice() {
            [] => None,
            _ if groups.iter().any(|g| g == ROOT_GROUP) => Some(Reach::Fleet),
            _ => Some(Reach::Groups(groups.into())),
        }
    }

    /// `securable:operation` names what policy.yaml declares; else what is wrong, with the
    /// closest declared names.
    pub fn check_pair(&self, securable: &str, operation: &str) -> Result<(), String> {
        let mut problems = Vec::new();
        if !self.securables.contains(&securable) {
            let known = self.securables.iter().copied();
            problems.push(format!("no securable `{securable}`: {}", toolgate_policy::did_you_mean(securable, known)));
        }
        if !self.operations.iter().any(|(o, _)| *o == operation) {
            let known = self.operations.iter().map(|(o, _)| *o);
            problems.push(format!("no operation `{operation}`: {}", toolgate_policy::did_you_mean(operation, known)));
        }
        if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
    }

    /// Whose approval tickets `principal` may decide: every one through a fleet-wide grant
    /// of policy.yaml `server.reviewer_permission`, those within its groups through a grant on
    /// groups, none without one (it then reads only its own).
    pub fn review_reach(&self, principal: &crate::Principal) -> Option<crate::groups::Reach> {
        if principal.kind == crate::engines::PrincipalKind::Engine {
            return None; // automation never approves anything
        }
        self.reach(principal, self.reviewer.securable, self.reviewer.operation)
    }

    /// The administrator-class grants of `role`: each of its patterns that covers one of
    /// policy.yaml `engines.administrator_permissions`, with that permission.
    pub fn administrator_grants(&self, role: &str) -> Vec<(String, String)> {
        let Some(grants) = self.roles.iter().find(|r| r.name == role) else { return vec![] };
        grants
            .grants
            .iter()
            .filter_map(|granted| {
                let admin = self.engines.administrator_permissions.iter().find(|a| granted.overlaps(*a))?;
                Some((granted.text(), admin.text()))
            })
            .collect()
    }

    /// A fleet-wide reviewer: the one who may read the server's own figures (`/metrics`).
    pub fn may_review(&self, roles: &[String]) -> bool {
        toolgate_policy::permits_pair(self.roles, roles, self.reviewer)
    }

    pub fn may_manage_principals(&self, roles: &[String]) -> bool {
        toolgate_policy::permits_pair(self.roles, roles, self.principal_admin)
    }
}

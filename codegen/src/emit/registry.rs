//! `ToolId`, the metadata table, name lookup, tiers, the decision matrix and the policy tables
//! the runtime evaluates (RBAC, and the tier rules the cross-checks compare with the matrix).

use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;

use super::{SourcePaths, paths};
use crate::model::{OperationClass, Rule};
use crate::policy::{self, Pattern};
use crate::rules::Checked;

pub fn ident(name: &str) -> Ident {
    Ident::new(name, Span::call_site())
}

fn class_tokens(class: OperationClass) -> TokenStream {
    let v = ident(class.variant());
    quote!(OperationClass::#v)
}

fn alias_tokens(alias: &crate::model::AliasSpec) -> TokenStream {
    let types = paths::alias_types();
    let (name, stands_for) = (&alias.name, &alias.stands_for);
    let within = opt_str(alias.within.clone());
    let conversion = match (&alias.with, alias.one_item_list, alias.values.is_empty()) {
        (Some(with), ..) => quote!(#types::Conversion::Pair { with: #with }),
        (None, true, _) => quote!(#types::Conversion::OneItemList),
        (None, false, false) => {
            let pairs = alias.values.iter().map(|(from, to)| quote!((#from, #to)));
            quote!(#types::Conversion::Values(&[#(#pairs),*]))
        }
        (None, false, true) => quote!(#types::Conversion::Same),
    };
    quote!(#types::ArgumentAlias { name: #name, stands_for: #stands_for, within: #within, conversion: #conversion })
}

fn opt_str(value: Option<String>) -> TokenStream {
    match value {
        Some(s) => quote!(Some(#s)),
        None => quote!(None),
    }
}

fn patterns<'a>(rules: impl IntoIterator<Item = &'a str>) -> TokenStream {
    let items = rules.into_iter().filter_map(|r| Pattern::parse(r).ok()).map(|p| {
        let s = opt_str(p.securable);
        let o = opt_str(p.operation);
        quote!(Pattern { securable: #s, operation: #o })
    });
    quote!(&[#(#items),*])
}

pub fn emit(checked: &Checked, sources: &SourcePaths) -> TokenStream {
    let tools = &checked.tools.model.tools;
    let policy = &checked.policy.model;
    let ids: Vec<Ident> = checked.plans.iter().map(|p| ident(&p.struct_name)).collect();
    let tool_count = tools.len();
    let tier_count = policy.tiers.len();

    let metas = tools.iter().zip(&checked.plans).enumerate().map(|(index, (tool, plan))| {
        let (name, title, description, securable, operation, handler) =
            (&tool.name, &tool.title, &tool.description, &tool.securable, &tool.operation, &tool.handler);
        let class = class_tokens(plan.class);
        let a = tool.annotations;
        let (ro, de, id, ow) = (a.readOnlyHint, a.destructiveHint, a.idempotentHint, a.openWorldHint);
        let input_schema = serde_json::to_string(&plan.published_input_schema).expect("serializes");
        let output_schema = opt_str(tool.output_schema.as_ref().map(|s| serde_json::to_string(s).expect("serializes")));
        let capabilities =
            opt_str(tool.required_client_capabilities.as_ref().map(|c| serde_json::to_string(c).expect("serializes")));
        let example = opt_str(plan.example.as_ref().map(|e| serde_json::to_string(e).expect("serializes")));
        let static_result = opt_str(tool.result.as_ref().map(|r| serde_json::to_string(r).expect("serializes")));
        let hint_override = match &tool.hint_override {
            Some(o) => {
                let (hint, reason) = (o.hint.key(), &o.reason);
                quote!(Some(HintOverride { hint: #hint, reason: #reason }))
            }
            None => quote!(None),
        };
        let gated = plan.approval_gated;
        let task_support = ident(tool.task_support.variant());
        let authorization = ident(tool.authorization.variant());
        let precondition = match tool.precondition {
            Some(p) => {
                let v = ident(p.variant());
                quote!(Some(Precondition::#v))
            }
            None => quote!(None),
        };
        let sensitive = &plan.sensitive;
        let agent_data = tool.agent_data;
        let pages = opt_str(tool.pages.clone());
        let plan_argument = match &tool.plan_argument {
            Some(name) => quote!(Some(#name)),
            None => quote!(None),
        };
        let store_fault_retry_ms = plan.store_fault_retry_ms;
        let aliases = tool.aliases.iter().map(alias_tokens);
        let toolset = match super::toolsets::index_of(checked, tool) {
            Some(i) => quote!(Some(#i)),
            None => quote!(None),
        };
        let keywords = &tool.keywords;
        // The tool's matrix row, written out: a reference into MATRIX from each of N statics
        // makes const evaluation copy the matrix N times (a 10,000-tool catalogue took rustc
        // past 15 GiB).
        let row = plan.decisions.iter().map(|d| {
            let v = ident(d.variant());
            quote!(Decision::#v)
        });
        quote! {
            ToolMeta {
                index: #index,
                name: #name,
                title: #title,
                description: #description,
                securable: #securable,
                operation: #operation,
                class: #class,
                annotations: Annotations { read_only: #ro, destructive: #de, idempotent: #id, open_world: #ow },
                hint_override: #hint_override,
                handler: #handler,
                input_schema: #input_schema,
                output_schema: #output_schema,
                required_client_capabilities: #capabilities,
                task_support: TaskSupport::#task_support,
                authorization: Authorization::#authorization,
                precondition: #precondition,
                example_arguments: #example,
                static_result: #static_result,
                approval_gated: #gated,
                decisions: &[#(#row),*],
                sensitive_arguments: &[#(#sensitive),*],
                agent_data: #agent_data,
                pages: #pages,
                plan_argument: #plan_argument,
                store_fault_retry_ms: #store_fault_retry_ms,
                aliases: &[#(#aliases),*],
                toolset: #toolset,
                keywords: &[#(#keywords),*],
            }
        }
    });

    let mut by_name: Vec<(&str, &Ident)> = tools.iter().map(|t| t.name.as_str()).zip(ids.iter()).collect();
    by_name.sort_by(|a, b| a.0.cmp(b.0));
    let by_name = by_name.iter().map(|(name, id)| quote!((#name, ToolId::#id)));

    let tier_names: Vec<&str> = policy.tiers.iter().map(|t| t.name.as_str()).collect();
    let tier_variants: Vec<Ident> = tier_names.iter().map(|n| ident(&crate::args::pascal_case(n))).collect();
    let tier_rules = policy.tiers.iter().enumerate().map(|(index, t)| {
        let name = &t.name;
        let allow = patterns(t.allow.iter().map(Rule::pattern));
        let approval = patterns(t.approval.iter().map(Rule::pattern));
        let confirm = patterns(t.confirm.iter().map(Rule::pattern));
        let scope = match &t.scope {
            Some(scope) => quote!(Some(#scope)),
            None => quote!(None),
        };
        quote!(TierRules { name: #name, index: #index, scope: #scope, allow: #allow, approval: #approval, confirm: #confirm })
    });
    let roles = policy.roles.iter().map(|r| {
        let name = &r.name;
        let grants = patterns(policy::role_grants(policy, r));
        quote!(RoleGrants { name: #name, grants: #grants })
    });
    let role_count = policy.roles.len();
    let operations = policy.operations.iter().map(|(name, class)| {
        let class = class_tokens(*class);
        quote!((#name, #class))
    });
    let operation_count = policy.operations.len();
    let securables = &policy.securables;
    let securable_count = securables.len();
    let fleet_only = &policy.fleet_only;
    let fleet_only_count = fleet_only.len();

    let matrix_rows = checked.plans.iter().map(|plan| {
        let cells = plan.decisions.iter().map(|d| {
            let v = ident(d.variant());
            quote!(Decision::#v)
        });
        quote!([#(#cells),*])
    });
    let list_files = |suffix: &str| {
        let files = tier_names.iter().map(|t| {
            let file = format!("/tools_list.{t}{suffix}.json");
            quote!(include_str!(concat!(env!("OUT_DIR"), #file)))
        });
        quote!([#(#files),*])
    };
    let (tools_list_files, default_files, dynamic_files) =
        (list_files(""), list_files(".default"), list_files(".dynamic"));
    let (tools_path, policy_path) = (&sources.tools, &sources.policy);
    let (catalogue_types, policy_types) = (paths::catalogue_types(), paths::policy_types());
    let engine_types = paths::engine_types();
    let names = &policy.server;
    let first_start_role = &names.first_start_role;
    let demo_tier = ident(&crate::args::pascal_case(&names.demo_token_tier));
    let permission = |text: &str| {
        let (securable, operation) = text.split_once(':').expect("checked: one concrete pair");
        quote!(Permission { securable: #securable, operation: #operation })
    };
    let surface = |plans: &[crate::rules::PairPlan], entries: Vec<(String, String)>| {
        let items = plans.iter().zip(entries).map(|(plan, (name, spec))| {
            let (securable, operation) = (&plan.securable, &plan.operation);
            let row = plan.decisions.iter().map(|d| {
                let v = ident(d.variant());
                quote!(Decision::#v)
            });
            quote!(PromptResourceMeta { name: #name, securable: #securable, operation: #operation, decisions: &[#(#row),*], spec: #spec })
        });
        quote!(&[#(#items),*])
    };
    let model = &checked.tools.model;
    let prompts = surface(
        &checked.prompts_resources.prompts,
        model.prompts.iter().map(|p| (p.name.clone(), spec_json(p))).collect(),
    );
    let resources = surface(
        &checked.prompts_resources.resources,
        model.resources.iter().map(|r| (r.name.clone(), spec_json(r))).collect(),
    );
    let templates = surface(
        &checked.prompts_resources.templates,
        model.resource_templates.iter().map(|t| (t.name.clone(), spec_json(t))).collect(),
    );
    let optional_role = |role: &Option<String>| match role {
        Some(role) => quote!(Some(#role)),
        None => quote!(None),
    };
    let (group_owner, rbac_administrator) =
        (optional_role(&names.group_owner_role), optional_role(&names.rbac_administrator_role));
    let engines = &policy.engines;
    let human_only = &engines.human_only_roles;
    let administrator_permissions = engines.administrator_permissions.iter().map(|text| {
        let p = toolgate_policy::Pattern::parse(text).expect("checked: a pattern");
        let side = |s: &Option<String>| match s {
            Some(s) => quote!(Some(#s)),
            None => quote!(None),
        };
        let (securable, operation) = (side(&p.securable), side(&p.operation));
        quote!(Pattern { securable: #securable, operation: #operation })
    });
    let (per_minute, concurrent) = (engines.quota.requests_per_minute, engines.quota.concurrent_requests);
    let credential_tier = optional_role(&engines.credential_tier);
    let close_with_undecided = policy.access_reviews.close_with_undecided;
    let reviewer = permission(&names.reviewer_permission);
    let principal_admin = permission(&names.principal_admin_permission);
    let toolsets = super::toolsets::emit(checked);

    quote! {
        #[allow(unused_imports)]
        use #catalogue_types::{Annotations, Authorization, Catalogue, HintOverride, Precondition, PromptResourceMeta, TaskSupport, ToolMeta};
        #[allow(unused_imports)]
        use #engine_types::{EngineQuota, EngineRules};
        #[allow(unused_imports)]
        use #policy_types::{Decision, OperationClass, Pattern, Permission, RoleGrants, TierRules};

        /// Every tool in tools.yaml, in its order.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u16)]
        pub enum ToolId { #(#ids),* }

        pub const TOOL_COUNT: usize = #tool_count;

        impl ToolId {
            pub const ALL: [ToolId; TOOL_COUNT] = [#(ToolId::#ids),*];

            pub fn meta(self) -> &'static ToolMeta {
                &TOOLS[self as usize]
            }

            pub fn index(self) -> usize {
                self as usize
            }

            /// Exact, case-sensitive lookup by tool name.
            pub fn from_name(name: &str) -> Option<ToolId> {
                TOOLS_BY_NAME.binary_search_by(|(n, _)| (*n).cmp(name)).ok().map(|i| TOOLS_BY_NAME[i].1)
            }
        }

        pub static TOOLS: [ToolMeta; TOOL_COUNT] = [#(#metas),*];

        static TOOLS_BY_NAME: [(&str, ToolId); TOOL_COUNT] = [#(#by_name),*];

        /// The tiers policy.yaml declares, in its order.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Tier { #(#tier_variants),* }

        pub const TIER_COUNT: usize = #tier_count;

        impl Tier {
            pub const ALL: [Tier; TIER_COUNT] = [#(Tier::#tier_variants),*];

            pub fn name(self) -> &'static str {
                TIER_RULES[self as usize].name
            }

            /// The tier's rules, as the gate and handlers see a caller's tier.
            pub fn rules(self) -> &'static TierRules {
                &TIER_RULES[self as usize]
            }

            pub fn index(self) -> usize {
                self as usize
            }

            /// A tier name that policy.yaml does not declare is `None`, which allows nothing.
            pub fn from_name(name: &str) -> Option<Tier> {
                Tier::ALL.into_iter().find(|t| t.name() == name)
            }
        }

        /// The build-time decision for every tool (row) at every tier (column).
        pub static MATRIX: [[Decision; TIER_COUNT]; TOOL_COUNT] = [#(#matrix_rows),*];

        /// The tier rules as written, for deciding pairs that are not tools (`check_permission`).
        pub static TIER_RULES: [TierRules; TIER_COUNT] = [#(#tier_rules),*];

        /// RBAC roles with their `includes` already followed.
        pub static ROLES: [RoleGrants; #role_count] = [#(#roles),*];

        pub static OPERATIONS: [(&str, OperationClass); #operation_count] = [#(#operations),*];

        pub static SECURABLES: [&str; #securable_count] = [#(#securables),*];

        /// policy.yaml `fleet_only`: a role on a group grants nothing on these securables.
        pub static FLEET_ONLY: [&str; #fleet_only_count] = [#(#fleet_only),*];

        /// The `tools` array each tier sees (Deny tools hidden), as served.
        pub static TOOLS_LIST_BY_TIER: [&str; TIER_COUNT] = #tools_list_files;

        /// What each tier is shown when nothing is chosen (its default toolsets), and with
        /// `dynamic` (the core toolsets): for the snapshots and the figures; the server puts
        /// the same bytes together from each tool's entry.
        pub static TOOLS_LIST_DEFAULT_BY_TIER: [&str; TIER_COUNT] = #default_files;
        pub static TOOLS_LIST_DYNAMIC_BY_TIER: [&str; TIER_COUNT] = #dynamic_files;

        /// The whole catalogue's `tools` array.
        pub static TOOLS_LIST_ALL: &str = include_str!(concat!(env!("OUT_DIR"), "/tools_list.all.json"));

        /// The policy matrix as Markdown (docs/policy-matrix.md is checked against it).
        pub static POLICY_MATRIX_MD: &str = include_str!(concat!(env!("OUT_DIR"), "/policy-matrix.md"));

        /// The decisions by role, fleet-wide and on a group (docs/policy-roles.md is checked
        /// against it, and the gate against every cell).
        pub static POLICY_ROLES_MD: &str = include_str!(concat!(env!("OUT_DIR"), "/policy-roles.md"));

        /// policy.yaml `server`: the role of the principal created on first start.
        pub const FIRST_START_ROLE: &str = #first_start_role;
        /// policy.yaml `server`: the tier of the demo token printed on first start.
        pub const DEMO_TOKEN_TIER: Tier = Tier::#demo_tier;
        /// policy.yaml `server`: deciding approvals, holding an administrator API credential.
        pub const REVIEWER_PERMISSION: Permission = #reviewer;
        /// policy.yaml `server`: revoking other principals' API tokens.
        pub const PRINCIPAL_ADMIN_PERMISSION: Permission = #principal_admin;

        /// Everything the gate and the handlers look up, in one value.
        pub static CATALOGUE: Catalogue = Catalogue {
            tools: &TOOLS,
            prompts: #prompts,
            resources: #resources,
            templates: #templates,
            tiers: &TIER_RULES,
            roles: &ROLES,
            securables: &SECURABLES,
            fleet_only: &FLEET_ONLY,
            operations: &OPERATIONS,
            reviewer: REVIEWER_PERMISSION,
            principal_admin: PRINCIPAL_ADMIN_PERMISSION,
            group_owner_role: #group_owner,
            rbac_administrator_role: #rbac_administrator,
            engines: EngineRules {
                human_only_roles: &[#(#human_only),*],
                administrator_permissions: &[#(#administrator_permissions),*],
                quota: EngineQuota { requests_per_minute: #per_minute, concurrent_requests: #concurrent },
                credential_tier: #credential_tier,
            },
            close_reviews_with_undecided: #close_with_undecided,
            toolsets: &TOOLSETS,
            tier_toolsets: &TIER_TOOLSETS,
        };

        #toolsets

        /// The files this binary was built from, for `toolgate explain` and `toolgate check`.
        pub static TOOLS_YAML: &str = include_str!(#tools_path);
        pub static POLICY_YAML: &str = include_str!(#policy_path);
        pub static TOOLS_YAML_PATH: &str = #tools_path;
        pub static POLICY_YAML_PATH: &str = #policy_path;
    }
}

/// A prompt, resource or template entry as the JSON the server reads back.
fn spec_json<T: serde::Serialize>(entry: &T) -> String {
    serde_json::to_string(entry).expect("a catalogue entry serializes")
}

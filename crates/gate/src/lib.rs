//! The gate every tool call passes before its handler runs, in this order: the read-only kill
//! switch, the tier (the generated matrix), RBAC (the principal's roles), the arguments
//! (the tool's inputSchema), then human approval (ticket, then recall). It returns
//! [`Passed`] or a typed [`Denial`]; it knows no HTTP and no JSON-RPC.

mod approval;
mod arguments;
mod deciding;
mod review;
mod reviewing;

use std::sync::Arc;

use serde_json::Value;
use toolgate_domain::aliases::ArgumentAlias;
use toolgate_domain::approvals::Approval;
use toolgate_domain::catalogue::{Authorization, Catalogue, PromptResourceMeta, ToolMeta};
use toolgate_domain::denial::Denial;
use toolgate_domain::groups::Reach;
use toolgate_domain::{Caller, Clock};
use toolgate_policy::{APPROVAL_ID, Decision, OperationClass};
use toolgate_store::ApprovalStore;

pub use approval::ticket_or_recall;
pub use arguments::{SchemaError, Schemas};
pub use deciding::Deciders;
pub use review::{Decide, review};
pub use reviewing::Reviewing;

/// A call the gate let through: its arguments (without `approval_id`) and the approval it
/// consumed, if it needed one.
#[derive(Debug)]
pub struct Passed {
    pub arguments: Value,
    pub approval: Option<Box<Approval>>,
    /// The agents the caller's grant of the tool's pair covers (the handler is confined to it).
    pub reach: Reach,
    /// The tier wants the client's own user to confirm the call before it runs (policy.yaml
    /// `confirm`); the protocol layer asks, since only it can reach the client.
    pub confirm: bool,
    /// A ticket was just minted for a change that can plan (tools.yaml `planArgument`): the
    /// call runs now as a plan (`arguments` ask for one), for the person deciding to see what
    /// it would change; the caller is then answered with this ticket.
    pub planning: Option<Box<Approval>>,
}

/// Checks some tools' arguments beyond their schema, before any approval work: what the
/// schema cannot know (an instruction's own parameter schema, say). A human is then never
/// asked to approve a call that would fail on its arguments.
pub trait ArgumentCheck: Send + Sync {
    /// Every problem with `arguments` of `tool` (empty: fine, or not a tool it checks).
    fn problems(&self, tool: &ToolMeta, arguments: &Value) -> Vec<toolgate_domain::denial::ArgumentProblem>;

    /// The value a pair alias names (tools.yaml `aliases` with `with`: the reference's
    /// `plugin` and `action` name an instruction definition), or why there is none.
    fn resolve_pair(&self, alias: &ArgumentAlias, _first: &str, _second: &str) -> Result<String, String> {
        Err(unresolved_pair(alias))
    }
}

/// Why a pair alias names nothing on a server that resolves none.
fn unresolved_pair(alias: &ArgumentAlias) -> String {
    let target = alias.stands_for;
    format!("this server resolves no `{target}` from the reference's `{}` and its partner: name `{target}`", alias.name)
}

/// What the tier and RBAC made of a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authorized {
    /// The tier's decision (never Deny).
    pub decision: Decision,
    pub reach: Reach,
}

pub struct Gate {
    catalogue: &'static Catalogue,
    schemas: Schemas,
    argument_check: Option<Arc<dyn ArgumentCheck>>,
    approvals: Arc<dyn ApprovalStore>,
    clock: Clock,
    read_only: bool,
    deciders: Option<Deciders>,
}

impl Gate {
    /// `read_only`: refuse every tool that is not read-class, for every tier.
    pub fn new(
        catalogue: &'static Catalogue,
        approvals: Arc<dyn ApprovalStore>,
        clock: Clock,
        read_only: bool,
    ) -> Result<Self, SchemaError> {
        Ok(Self {
            catalogue,
            schemas: Schemas::compile(catalogue)?,
            argument_check: None,
            approvals,
            clock,
            read_only,
            deciders: None,
        })
    }

    /// What the tools.yaml `authorization` checks read (a gate without it refuses the tools
    /// that declare one).
    pub fn with_deciders(mut self, deciders: Deciders) -> Self {
        self.deciders = Some(deciders);
        self
    }

    /// Adds checks beyond the schemas, run right after them.
    pub fn with_argument_check(mut self, check: Arc<dyn ArgumentCheck>) -> Self {
        self.argument_check = Some(check);
        self
    }

    pub fn catalogue(&self) -> &'static Catalogue {
        self.catalogue
    }

    pub fn schemas(&self) -> &Schemas {
        &self.schemas
    }

    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// Whether `--read-only` hides and refuses `tool`.
    pub fn refused_by_read_only(&self, tool: &ToolMeta) -> bool {
        self.read_only && tool.class != OperationClass::Read
    }

    /// The whole pipeline for one call.
    pub async fn pass(&self, caller: &Caller, tool: &'static ToolMeta, mut arguments: Value) -> Result<Passed, Denial> {
        if self.refused_by_read_only(tool) {
            return Err(Denial::ReadOnlyMode { tool: tool.name });
        }
        let Authorized { decision, reach } = match tool.authorization {
            // Instead of, not beside, the permission check: the pair drives the tier only.
            Authorization::DurableAdministrator => {
                let decision = self.tier_decision(caller, tool.name, tool.securable, tool.operation, tool.decisions)?;
                self.deciders()?.durable_administrator(caller, tool).await?;
                Authorized { decision, reach: Reach::Fleet }
            }
            Authorization::Permission | Authorization::FleetOrGroupOwner | Authorization::FleetWide => {
                self.authorize(caller, tool)?
            }
        };
        // The reference's argument names become the tool's own before anything reads them,
        // so a ticket, the audit row and the handler see one spelling.
        if !tool.aliases.is_empty() {
            let resolve = |alias: &ArgumentAlias, first: &str, second: &str| match &self.argument_check {
                Some(check) => check.resolve_pair(alias, first, second),
                None => Err(unresolved_pair(alias)),
            };
            let problems = toolgate_domain::aliases::apply(tool.aliases, &mut arguments, &resolve);
            if !problems.is_empty() {
                return Err(self.schemas.refuse(tool, problems));
            }
        }
        // Arguments before any approval is looked up, minted or consumed.
        self.schemas.check(tool, &arguments)?;
        if let Some(check) = &self.argument_check {
            let problems = check.problems(tool, &arguments);
            if !problems.is_empty() {
                return Err(self.schemas.refuse(tool, problems));
            }
        }
        // A grant confined to groups decides only as the named group's owner (its arguments
        // are known good now, and no approval has been asked for yet).
        if tool.authorization == Authorization::FleetOrGroupOwner && !reach.is_fleet() {
            self.deciders()?.group_owner(caller, tool, &arguments).await?;
        }
        // `approval_id` is the gate's argument only on gated tools (it is in their published
        // schema); elsewhere it is the tool's own.
        let approval_id = match tool.approval_gated {
            true => arguments
                .as_object_mut()
                .and_then(|o| o.remove(APPROVAL_ID))
                .and_then(|v| v.as_str().map(str::to_string)),
            false => None,
        };
        // The live state the call relies on, before any ticket is minted or consumed: failing,
        // a ticket it names stays recallable.
        if let Some(precondition) = tool.precondition {
            let recall = approval_id.is_some();
            let held = self.deciders()?.precondition(precondition, tool, &arguments, recall, &self.clock, &reach).await;
            if let (Err(Denial::Precondition { .. }), Some(id)) = (&held, &approval_id) {
                // A ticket already used (a replay, say) is refused as such: "stays unconsumed"
                // would not be the truth about it.
                let name = &caller.principal.name;
                let never = approval::never_redeemable(self.approvals.as_ref(), &self.clock, name, tool, id).await?;
                if let Some(why) = never {
                    return Err(Denial::NotRedeemable { approval_id: id.clone(), why });
                }
            }
            held?;
        }
        // A plan changes nothing: no person need approve or confirm it.
        let plans = tool.plan_argument.is_some_and(|name| arguments.get(name) == Some(&Value::Bool(true)));
        let decision = match decision {
            Decision::ApprovalRequired | Decision::ConfirmRequired if plans => Decision::Allow,
            decision => decision,
        };
        let approval = match decision {
            Decision::ApprovalRequired => {
                let ticket = approval::ticket_or_recall(
                    self.approvals.as_ref(),
                    &self.clock,
                    toolgate_domain::approvals::MCP_SURFACE,
                    &caller.principal.name,
                    tool,
                    &arguments,
                    approval_id.as_deref(),
                )
                .await;
                match (ticket, tool.plan_argument) {
                    (Err(Denial::ApprovalPending { approval, minted: true }), Some(plan)) => {
                        if let Some(object) = arguments.as_object_mut() {
                            object.insert(plan.to_string(), Value::Bool(true));
                        }
                        return Ok(Passed {
                            arguments,
                            approval: None,
                            reach,
                            confirm: false,
                            planning: Some(approval),
                        });
                    }
                    (ticket, _) => Some(ticket?),
                }
            }
            _ => None,
        };
        Ok(Passed { arguments, approval, reach, confirm: decision == Decision::ConfirmRequired, planning: None })
    }

    /// Tier first, always; then RBAC: the tier's decision, and what the grant covers. A tool
    /// decided by a durable administrator role is refused here: only [`Gate::pass`] reads
    /// that role, fresh from the store.
    pub fn authorize(&self, caller: &Caller, tool: &'static ToolMeta) -> Result<Authorized, Denial> {
        if tool.authorization == Authorization::DurableAdministrator {
            let requirement = "its deciding check, which only a call runs".to_string();
            return Err(Denial::RoleRequired { tool: tool.name, requirement });
        }
        let authorized = self.authorize_pair(caller, tool.name, tool.securable, tool.operation, tool.decisions)?;
        if tool.authorization == Authorization::FleetWide && !authorized.reach.is_fleet() {
            let requirement = format!(
                "a fleet-wide grant of {}: it acts on what belongs to the whole fleet, and a role on a management group grants nothing here",
                tool.pair()
            );
            return Err(Denial::RoleRequired { tool: tool.name, requirement });
        }
        Ok(authorized)
    }

    /// The same gate for a prompt, resource or template: its tier, then RBAC; what the
    /// grant covers (its data is confined to it).
    pub fn authorize_prompt_resource(
        &self,
        caller: &Caller,
        item: &'static PromptResourceMeta,
    ) -> Result<Reach, Denial> {
        self.authorize_pair(caller, item.name, item.securable, item.operation, item.decisions).map(|a| a.reach)
    }

    fn authorize_pair(
        &self,
        caller: &Caller,
        name: &'static str,
        securable: &str,
        operation: &str,
        decisions: &[Decision],
    ) -> Result<Authorized, Denial> {
        let decision = self.tier_decision(caller, name, securable, operation, decisions)?;
        // A role on a group grants the pair over that group's agents: the call may go on,
        // confined to them.
        let Some(reach) = self.catalogue.reach(&caller.principal, securable, operation) else {
            return Err(Denial::NotGranted { tool: name, pair: format!("{securable}:{operation}") });
        };
        Ok(Authorized { decision, reach })
    }

    /// The tier's decision for the pair; a tier that denies it is the caller's answer.
    fn tier_decision(
        &self,
        caller: &Caller,
        name: &'static str,
        securable: &str,
        operation: &str,
        decisions: &[Decision],
    ) -> Result<Decision, Denial> {
        let decision = caller.tier.map_or(Decision::Deny, |t| decisions[t.index]);
        if decision == Decision::Deny {
            let allowed_in =
                self.catalogue.tiers.iter().filter(|t| decisions[t.index] != Decision::Deny).map(|t| t.name).collect();
            let pair = format!("{securable}:{operation}");
            return Err(Denial::Tier { tool: name, tier: caller.tier_label().to_string(), pair, allowed_in });
        }
        Ok(decision)
    }

    fn deciders(&self) -> Result<&Deciders, Denial> {
        self.deciders.as_ref().ok_or(Denial::SchemaFault {
            tool: "(gate)",
            why: "a tool's deciding check needs the store, and this gate was built without it".into(),
        })
    }
}

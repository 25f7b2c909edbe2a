//! Plans on the wire (docs/instructions.md, "Plan, then apply"): a step that only plans, and
//! a change that carries the digest of the plan a person approved for that very agent. Only
//! agents of protocol 4 on can take either; each agent is sent its own approved digest, never
//! the others'.

use std::borrow::Cow;

use toolgate_domain::fleet::wire::{RunOrder, StepMode};

/// The first agent protocol whose steps may be plans or carry an approved plan.
pub(crate) const PLAN_PROTOCOL: u32 = 4;

pub const NO_APPROVED_PLAN: &str = "refused: no plan of this agent was approved (it had none when the change was approved: offline, refused or failed to plan), so it changes nothing";

pub const TOO_OLD_TO_PLAN: &str = "refused: this instruction is a plan, or a change bound to an approved plan, and this agent speaks a protocol older than 4, which has neither: upgrade the agent";

/// Whether `order` needs an agent that can plan.
pub(crate) fn needs_plans(order: &RunOrder) -> bool {
    order.steps.iter().any(|s| s.mode == StepMode::Plan || !s.approved_plans.is_empty())
}

/// `order` as `agent_id` is sent it: each step's approved plan is that agent's (none when a
/// person approved none for it), and the map of every agent's stays on the server.
pub(crate) fn for_agent<'o>(order: &'o RunOrder, agent_id: &str) -> Cow<'o, RunOrder> {
    if order.steps.iter().all(|s| s.approved_plans.is_empty()) {
        return Cow::Borrowed(order);
    }
    let mut own = order.clone();
    for step in &mut own.steps {
        step.approved_plan = std::mem::take(&mut step.approved_plans).remove(agent_id);
    }
    Cow::Owned(own)
}

/// `agent_ids` split into those the order may go to and those it never may: a change bound
/// to approved plans goes only to the agents a person approved a plan of.
pub(crate) fn approved_only(order: &RunOrder, agent_ids: Vec<String>) -> (Vec<String>, Vec<String>) {
    let bound: Vec<_> = order.steps.iter().filter(|s| !s.approved_plans.is_empty()).collect();
    if bound.is_empty() {
        return (agent_ids, Vec::new());
    }
    agent_ids.into_iter().partition(|agent_id| bound.iter().all(|s| s.approved_plans.contains_key(agent_id)))
}

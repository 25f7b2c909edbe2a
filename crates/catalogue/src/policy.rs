//! Evaluating policy.yaml at build time: which tier may call which pair, and why.

use std::collections::BTreeSet;

use crate::model::{Policy, RoleDef, Rule};

pub use toolgate_policy::{Decision, Pattern};

/// A decision and the rules that made it, for `toolgate explain`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub decision: Decision,
    /// The first `allow` rule that matched.
    pub allowed_by: Option<String>,
    /// The first `approval` rule that matched (only when allowed).
    pub approval_by: Option<String>,
    /// The first `confirm` rule that matched (only when allowed and not approval-gated).
    pub confirm_by: Option<String>,
}

/// The rules that parse, as patterns, beside their text (the checks report the others).
fn parsed(rules: &[Rule]) -> (Vec<&str>, Vec<Pattern<String>>) {
    rules.iter().filter_map(|r| Pattern::parse(r.pattern()).ok().map(|p| (r.pattern(), p))).unzip()
}

/// The decision for `securable:operation` at the tier named `tier`; an unknown tier denies.
/// The evaluation is the server's own ([`toolgate_policy::evaluate`]).
pub fn decide(policy: &Policy, tier: &str, securable: &str, operation: &str) -> Verdict {
    let Some(tier) = policy.tiers.iter().find(|t| t.name == tier) else {
        return Verdict { decision: Decision::Deny, allowed_by: None, approval_by: None, confirm_by: None };
    };
    let (allow_text, allow) = parsed(&tier.allow);
    let (approval_text, approval) = parsed(&tier.approval);
    let (confirm_text, confirm) = parsed(&tier.confirm);
    let rules = toolgate_policy::Rules { allow: &allow, approval: &approval, confirm: &confirm };
    let v = toolgate_policy::evaluate(rules, securable, operation);
    Verdict {
        decision: v.decision,
        allowed_by: v.allowed_by.map(|i| allow_text[i].to_string()),
        approval_by: v.approval_by.map(|i| approval_text[i].to_string()),
        confirm_by: v.confirm_by.map(|i| confirm_text[i].to_string()),
    }
}

/// Every pattern a role grants, its `includes` followed (cycles are reported by the checks).
pub fn role_grants<'a>(policy: &'a Policy, role: &'a RoleDef) -> Vec<&'a str> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![role];
    let mut grants = Vec::new();
    while let Some(r) = stack.pop() {
        if !seen.insert(r.name.as_str()) {
            continue;
        }
        grants.extend(r.permissions.iter().map(Rule::pattern));
        for included in &r.includes {
            if let Some(inner) = policy.roles.iter().find(|x| &x.name == included) {
                stack.push(inner);
            }
        }
    }
    grants
}

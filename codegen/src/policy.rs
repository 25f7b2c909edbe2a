//! Evaluating policy.yaml at build time: which tier may call which pair, and why.

use std::collections::BTreeSet;

use crate::model::{Policy, RoleDef, Rule};

/// `Securable:Operation` where either side may be `*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    pub securable: Option<String>,
    pub operation: Option<String>,
}

impl Pattern {
    pub fn parse(text: &str) -> Result<Self, String> {
        let Some((s, o)) = text.split_once(':') else {
            return Err(format!("`{text}` is not a `Securable:Operation` pattern"));
        };
        let side = |part: &str, what: &str| -> Result<Option<String>, String> {
            let part = part.trim();
            if part == "*" {
                Ok(None)
            } else if part.is_empty() {
                Err(format!("`{text}` has an empty {what}"))
            } else if part.contains('*') {
                Err(format!("`{text}`: `*` stands for a whole {what}, not part of one"))
            } else if part.contains(':') {
                Err(format!("`{text}` has more than one `:`"))
            } else {
                Ok(Some(part.to_string()))
            }
        };
        Ok(Self { securable: side(s, "securable")?, operation: side(o, "operation")? })
    }

    pub fn matches(&self, securable: &str, operation: &str) -> bool {
        self.securable.as_deref().is_none_or(|s| s == securable)
            && self.operation.as_deref().is_none_or(|o| o == operation)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Decision {
    Allow,
    ApprovalRequired,
    Deny,
}

impl Decision {
    pub fn label(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::ApprovalRequired => "approval",
            Decision::Deny => "deny",
        }
    }

    pub fn variant(self) -> &'static str {
        match self {
            Decision::Allow => "Allow",
            Decision::ApprovalRequired => "ApprovalRequired",
            Decision::Deny => "Deny",
        }
    }
}

/// A decision and the rules that made it, for `toolgate explain`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub decision: Decision,
    /// The first `allow` rule that matched.
    pub allowed_by: Option<String>,
    /// The first `approval` rule that matched (only when allowed).
    pub approval_by: Option<String>,
}

fn first_match<'a>(rules: &'a [Rule], securable: &str, operation: &str) -> Option<&'a str> {
    rules.iter().map(Rule::pattern).find(|p| Pattern::parse(p).is_ok_and(|p| p.matches(securable, operation)))
}

/// The decision for `securable:operation` at the tier named `tier`; an unknown tier denies.
pub fn decide(policy: &Policy, tier: &str, securable: &str, operation: &str) -> Verdict {
    let deny = Verdict { decision: Decision::Deny, allowed_by: None, approval_by: None };
    let Some(tier) = policy.tiers.iter().find(|t| t.name == tier) else {
        return deny;
    };
    let Some(allowed_by) = first_match(&tier.allow, securable, operation) else {
        return deny;
    };
    let approval_by = first_match(&tier.approval, securable, operation);
    Verdict {
        decision: if approval_by.is_some() { Decision::ApprovalRequired } else { Decision::Allow },
        allowed_by: Some(allowed_by.to_string()),
        approval_by: approval_by.map(str::to_string),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        let p = Pattern::parse("*:Read").unwrap();
        assert!(p.matches("Tag", "Read"));
        assert!(!p.matches("Tag", "Write"));
        assert!(Pattern::parse("Tag*:Read").is_err());
        assert!(Pattern::parse("TagRead").is_err());
        assert!(Pattern::parse("Tag:").is_err());
    }
}

//! `Securable:Operation` patterns and what a tier or a role makes of a pair.

use serde::{Deserialize, Serialize};

/// `Securable:Operation` where `None` stands for `*`. `S` is `String` when parsed from YAML
/// (the generator) and `&'static str` in the tables the generator emits (the server).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pattern<S = &'static str> {
    pub securable: Option<S>,
    pub operation: Option<S>,
}

impl Pattern<String> {
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
}

impl<S: AsRef<str>> Pattern<S> {
    pub fn matches(&self, securable: &str, operation: &str) -> bool {
        self.securable.as_ref().is_none_or(|s| s.as_ref() == securable)
            && self.operation.as_ref().is_none_or(|o| o.as_ref() == operation)
    }

    pub fn text(&self) -> String {
        let side = |s: &Option<S>| s.as_ref().map_or("*".to_string(), |s| s.as_ref().to_string());
        format!("{}:{}", side(&self.securable), side(&self.operation))
    }
}

impl<S: AsRef<str>> Pattern<S> {
    /// Some pair matches both: a role granting `self` grants some of what `other` names.
    pub fn overlaps<T: AsRef<str>>(&self, other: &Pattern<T>) -> bool {
        fn side<A: AsRef<str>, B: AsRef<str>>(a: &Option<A>, b: &Option<B>) -> bool {
            match (a, b) {
                (Some(a), Some(b)) => a.as_ref() == b.as_ref(),
                _ => true,
            }
        }
        side(&self.securable, &other.securable) && side(&self.operation, &other.operation)
    }
}

/// One concrete `Securable:Operation` pair the server's own code checks (policy.yaml `server`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Permission {
    pub securable: &'static str,
    pub operation: &'static str,
}

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.securable, self.operation)
    }
}

/// What a tier makes of a pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Decision {
    Allow,
    /// Runs once the client's own user confirms (elicitation or `input_required`): a safety
    /// net on the client's side, never a person's approval.
    ConfirmRequired,
    ApprovalRequired,
    Deny,
}

impl Decision {
    pub fn label(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::ConfirmRequired => "confirm",
            Decision::ApprovalRequired => "approval",
            Decision::Deny => "deny",
        }
    }

    /// The variant's name, as generated code spells it.
    pub fn variant(self) -> &'static str {
        match self {
            Decision::Allow => "Allow",
            Decision::ConfirmRequired => "ConfirmRequired",
            Decision::ApprovalRequired => "ApprovalRequired",
            Decision::Deny => "Deny",
        }
    }
}

// Every operation has a class; the class fixes a tool's hints. (A plain comment: a doc
// comment would become a description in the committed editor schema.)
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum OperationClass {
    Read,
    Write,
    Delete,
    Execute,
}

impl OperationClass {
    pub fn label(self) -> &'static str {
        match self {
            OperationClass::Read => "read",
            OperationClass::Write => "write",
            OperationClass::Delete => "delete",
            OperationClass::Execute => "execute",
        }
    }

    /// The variant's name, as generated code spells it.
    pub fn variant(self) -> &'static str {
        match self {
            OperationClass::Read => "Read",
            OperationClass::Write => "Write",
            OperationClass::Delete => "Delete",
            OperationClass::Execute => "Execute",
        }
    }
}

/// A decision and the rules that made it: indexes into the `allow` and `approval` lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub decision: Decision,
    /// The first `allow` rule that matched.
    pub allowed_by: Option<usize>,
    /// The first `approval` rule that matched (only when allowed).
    pub approval_by: Option<usize>,
    /// The first `confirm` rule that matched (only when allowed and not approval-gated).
    pub confirm_by: Option<usize>,
}

/// A tier's rules, as patterns: `allow`, and among the allowed, `approval` and `confirm`.
#[derive(Clone, Copy, Debug)]
pub struct Rules<'a, S> {
    pub allow: &'a [Pattern<S>],
    pub approval: &'a [Pattern<S>],
    pub confirm: &'a [Pattern<S>],
}

/// A tier's decision for `securable:operation`: denied unless an `allow` rule matches; then
/// approval-gated when an `approval` rule matches too, else confirm-gated when a `confirm`
/// rule does. (The generator refuses a pair that both gates match: a client-side
/// confirmation never stands in for a person's approval.)
pub fn evaluate<S: AsRef<str>>(rules: Rules<'_, S>, securable: &str, operation: &str) -> Verdict {
    let first = |rules: &[Pattern<S>]| rules.iter().position(|p| p.matches(securable, operation));
    let Some(allowed_by) = first(rules.allow) else {
        return Verdict { decision: Decision::Deny, allowed_by: None, approval_by: None, confirm_by: None };
    };
    let approval_by = first(rules.approval);
    let confirm_by = approval_by.is_none().then(|| first(rules.confirm)).flatten();
    let decision = match (approval_by, confirm_by) {
        (Some(_), _) => Decision::ApprovalRequired,
        (None, Some(_)) => Decision::ConfirmRequired,
        (None, None) => Decision::Allow,
    };
    Verdict { decision, allowed_by: Some(allowed_by), approval_by, confirm_by }
}

/// One tier's rules, as the generator emits them.
#[derive(Debug)]
pub struct TierRules {
    pub name: &'static str,
    /// Its position in policy.yaml: the column of the decision matrix.
    pub index: usize,
    /// The OAuth scope that selects it (policy.yaml `scope`), if any.
    pub scope: Option<&'static str>,
    pub allow: &'static [Pattern],
    pub approval: &'static [Pattern],
    pub confirm: &'static [Pattern],
}

impl TierRules {
    pub fn decide(&self, securable: &str, operation: &str) -> Decision {
        let rules = Rules { allow: self.allow, approval: self.approval, confirm: self.confirm };
        evaluate(rules, securable, operation).decision
    }
}

/// One role's grants, its `includes` already followed.
#[derive(Debug)]
pub struct RoleGrants {
    pub name: &'static str,
    pub grants: &'static [Pattern],
}

/// RBAC: `mine` (a principal's role names) may use `securable:operation` when one of them
/// grants it. Role names that `roles` does not declare grant nothing.
pub fn permits(roles: &[RoleGrants], mine: &[String], securable: &str, operation: &str) -> bool {
    roles
        .iter()
        .filter(|r| mine.iter().any(|m| m == r.name))
        .any(|r| r.grants.iter().any(|p| p.matches(securable, operation)))
}

/// [`permits`] for one concrete pair.
pub fn permits_pair(roles: &[RoleGrants], mine: &[String], permission: Permission) -> bool {
    permits(roles, mine, permission.securable, permission.operation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_patterns_share_a_pair() {
        let p = |t| Pattern::parse(t).unwrap();
        assert!(p("*:*").overlaps(&p("Security:Write")));
        assert!(p("Security:*").overlaps(&p("*:Write")));
        assert!(!p("*:Read").overlaps(&p("Security:Write")));
        assert!(!p("Tag:Write").overlaps(&p("Security:Write")));
    }

    #[test]
    fn patterns() {
        let p = Pattern::parse("*:Read").unwrap();
        assert!(p.matches("Tag", "Read"));
        assert!(!p.matches("Tag", "Write"));
        assert_eq!(p.text(), "*:Read");
        assert!(Pattern::parse("Tag*:Read").is_err());
        assert!(Pattern::parse("TagRead").is_err());
        assert!(Pattern::parse("Tag:").is_err());
    }

    #[test]
    fn tier_and_role_evaluation() {
        static ALL: [Pattern; 1] = [Pattern { securable: None, operation: None }];
        static DELETE: [Pattern; 1] = [Pattern { securable: None, operation: Some("Delete") }];
        static WRITE: [Pattern; 2] = [
            Pattern { securable: None, operation: Some("Write") },
            Pattern { securable: None, operation: Some("Delete") },
        ];
        let tier =
            TierRules { name: "supervised", index: 0, scope: None, allow: &ALL, approval: &DELETE, confirm: &WRITE };
        assert_eq!(tier.decide("Tag", "Delete"), Decision::ApprovalRequired, "approval wins over confirm");
        assert_eq!(tier.decide("Tag", "Write"), Decision::ConfirmRequired);
        assert_eq!(tier.decide("Tag", "Read"), Decision::Allow);
        let verdict = evaluate(Rules { allow: &DELETE, approval: &[], confirm: &[] }, "Tag", "Read");
        let denied = Verdict { decision: Decision::Deny, allowed_by: None, approval_by: None, confirm_by: None };
        assert_eq!(verdict, denied);
        let roles = [RoleGrants { name: "Deleter", grants: &DELETE }];
        assert!(permits(&roles, &["Deleter".into()], "Tag", "Delete"));
        assert!(!permits(&roles, &["Deleter".into()], "Tag", "Read"));
        assert!(!permits(&roles, &["Nobody".into()], "Tag", "Delete"));
    }
}

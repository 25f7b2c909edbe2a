//! Tier decisions. Tools are a lookup in the build-time matrix; other pairs (for
//! `check_permission`) evaluate the same rules, and the cross-check tests hold the two equal.

use crate::catalogue::Decision;
use crate::registry::{MATRIX, TIER_RULES, Tier, ToolId};

/// The decision for a tool at a tier; no tier (an unknown name) denies.
pub fn decision_for_tool(tier: Option<Tier>, tool: ToolId) -> Decision {
    match tier {
        Some(t) => MATRIX[tool.index()][t.index()],
        None => Decision::Deny,
    }
}

/// Evaluates the tier's rules for any `securable:operation` pair.
pub fn decide(tier: Option<Tier>, securable: &str, operation: &str) -> Decision {
    tier.map_or(Decision::Deny, |t| TIER_RULES[t.index()].decide(securable, operation))
}

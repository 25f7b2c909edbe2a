//! toolgate's policy, evaluated: `Securable:Operation` patterns, the decision a tier makes for
//! a pair, what a role grants, and closest-name suggestions. The generator (build time) and the
//! server (run time) both use this crate, so the two can never evaluate policy.yaml differently.

mod names;
mod pattern;

pub use names::{closest, did_you_mean};
pub use pattern::{
    Decision, OperationClass, Pattern, Permission, RoleGrants, Rules, TierRules, Verdict, evaluate, permits,
    permits_pair,
};

/// The argument the generator adds to every approval-gated tool's published inputSchema: the
/// recall names its approved ticket with it. The gate takes it out before the handler runs.
pub const APPROVAL_ID: &str = "approval_id";

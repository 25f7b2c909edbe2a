//! The gate every tools/call passes: kill switches, tier, RBAC, arguments, approval.

pub mod rbac;
pub mod tier;

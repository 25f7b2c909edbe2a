//! RBAC: a principal may use `Securable:Operation` when one of its roles grants it.

use crate::registry::ROLES;

pub fn permits(roles: &[String], securable: &str, operation: &str) -> bool {
    toolgate_policy::permits(&ROLES, roles, securable, operation)
}

pub fn permits_pair(roles: &[String], permission: crate::catalogue::Permission) -> bool {
    toolgate_policy::permits_pair(&ROLES, roles, permission)
}

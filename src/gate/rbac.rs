//! RBAC: a principal may use `Securable:Operation` when one of its roles grants it.

use crate::registry::ROLES;

pub fn permits(roles: &[String], securable: &str, operation: &str) -> bool {
    ROLES
        .iter()
        .filter(|r| roles.iter().any(|mine| mine == r.name))
        .any(|r| r.grants.iter().any(|p| p.matches(securable, operation)))
}

//! Credential rotations as both backends read them: a successor token row whose
//! `rotated_from` names its predecessor, and how the rotation ended (on the successor).

/// The rotation columns, successor `s` joined to predecessor `p`, in [`Rotation`]'s field
/// order; a backend adds its `WHERE`.
///
/// [`Rotation`]: toolgate_domain::tokens::Rotation
pub(crate) const ROTATION_SELECT: &str = "SELECT s.principal, p.id, s.id, s.created_at, p.expires_at, p.revoked_at, \
     s.rotation_resolution, s.rotation_resolved_at FROM api_token s JOIN api_token p ON p.id = s.rotated_from";

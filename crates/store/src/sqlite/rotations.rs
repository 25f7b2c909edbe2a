//! Credential rotations in SQLite: the reads and writes [`crate::CredentialStore`]'s
//! rotation methods run (see [`crate::rotations`]).

use rusqlite::{Connection, OptionalExtension, params};
use toolgate_domain::tokens::{Rotation, RotationResolution};

use crate::rotations::ROTATION_SELECT;

fn rotation_row(r: &rusqlite::Row) -> rusqlite::Result<Rotation> {
    Ok(Rotation {
        principal: r.get(0)?,
        predecessor_id: r.get(1)?,
        successor_id: r.get(2)?,
        started_at: r.get(3)?,
        overlap_ends_at: r.get(4)?,
        predecessor_revoked_at: r.get(5)?,
        resolution: r.get::<_, Option<String>>(6)?.as_deref().and_then(RotationResolution::from_label),
        resolved_at: r.get(7)?,
    })
}

pub(super) fn rotation(c: &Connection, successor_id: &str) -> rusqlite::Result<Option<Rotation>> {
    c.query_row(&format!("{ROTATION_SELECT} WHERE s.id = ?1"), params![successor_id], rotation_row).optional()
}

pub(super) fn rotations(c: &Connection, principal: &str) -> rusqlite::Result<Vec<Rotation>> {
    let mut stmt =
        c.prepare(&format!("{ROTATION_SELECT} WHERE s.principal = ?1 ORDER BY s.created_at DESC, s.id DESC"))?;
    stmt.query_map(params![principal], rotation_row)?.collect()
}

pub(super) fn resolve_lapsed(c: &mut Connection, now: i64) -> rusqlite::Result<Vec<Rotation>> {
    let tx = c.transaction()?;
    let ids: Vec<String> = {
        let mut stmt = tx.prepare(
            "UPDATE api_token SET rotation_resolution = 'expired', rotation_resolved_at = ?1
             WHERE rotated_from IS NOT NULL AND rotation_resolution IS NULL
               AND EXISTS (SELECT 1 FROM api_token p WHERE p.id = api_token.rotated_from AND p.revoked_at IS NULL AND p.expires_at <= ?1)
             RETURNING id",
        )?;
        stmt.query_map(params![now], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?
    };
    let resolved = ids.iter().filter_map(|id| rotation(&tx, id).transpose()).collect::<rusqlite::Result<Vec<_>>>()?;
    tx.commit()?;
    Ok(resolved)
}

/// Confirms the pending rotation to `successor_id` (its secret's hash given): the predecessor
/// revoked, the rotation resolved. The predecessor's id, or None.
pub(super) fn confirm(
    c: &mut Connection,
    successor_id: &str,
    hash: &str,
    principal: &str,
    now: i64,
) -> rusqlite::Result<Option<String>> {
    let tx = c.transaction()?;
    let predecessor: Option<Option<String>> = tx
        .query_row(
            "SELECT s.rotated_from FROM api_token s JOIN api_token p ON p.id = s.rotated_from
             WHERE s.id = ?1 AND s.secret_hash = ?2 AND s.principal = ?3 AND s.revoked_at IS NULL AND s.expires_at > ?4
               AND s.rotation_resolution IS NULL AND p.revoked_at IS NULL AND p.expires_at > ?4",
            params![successor_id, hash, principal, now],
            |r| r.get(0),
        )
        .optional()?;
    let Some(Some(predecessor)) = predecessor else { return Ok(None) };
    tx.execute("UPDATE api_token SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL", params![predecessor, now])?;
    tx.execute(
        "UPDATE api_token SET rotation_resolution = 'confirmed', rotation_resolved_at = ?2 WHERE id = ?1",
        params![successor_id, now],
    )?;
    tx.commit()?;
    Ok(Some(predecessor))
}

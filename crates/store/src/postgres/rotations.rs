//! Credential rotations on PostgreSQL (see the SQLite twin and [`crate::rotations`]).

use deadpool_postgres::GenericClient;
use toolgate_domain::tokens::{Rotation, RotationResolution};

use super::{Pg, execute, row, rows};
use crate::rotations::ROTATION_SELECT;

fn rotation_row(r: &tokio_postgres::Row) -> Pg<Rotation> {
    Ok(Rotation {
        principal: r.try_get(0)?,
        predecessor_id: r.try_get(1)?,
        successor_id: r.try_get(2)?,
        started_at: r.try_get(3)?,
        overlap_ends_at: r.try_get(4)?,
        predecessor_revoked_at: r.try_get(5)?,
        resolution: r.try_get::<_, Option<&str>>(6)?.and_then(RotationResolution::from_label),
        resolved_at: r.try_get(7)?,
    })
}

pub(super) async fn rotation(c: &impl GenericClient, successor_id: &str) -> Pg<Option<Rotation>> {
    row(c, &format!("{ROTATION_SELECT} WHERE s.id = $1"), &[&successor_id])
        .await?
        .as_ref()
        .map(rotation_row)
        .transpose()
}

pub(super) async fn rotations(c: &impl GenericClient, principal: &str) -> Pg<Vec<Rotation>> {
    let sql = format!("{ROTATION_SELECT} WHERE s.principal = $1 ORDER BY s.created_at DESC, s.id DESC");
    rows(c, &sql, &[&principal]).await?.iter().map(rotation_row).collect()
}

/// The ids of the rotations resolved as expired by `now`, in the transaction `c`.
pub(super) async fn resolve_lapsed(c: &impl GenericClient, now: i64) -> Pg<Vec<Rotation>> {
    let resolved = rows(
        c,
        "UPDATE api_token SET rotation_resolution = 'expired', rotation_resolved_at = $1
         WHERE rotated_from IS NOT NULL AND rotation_resolution IS NULL
           AND EXISTS (SELECT 1 FROM api_token p WHERE p.id = api_token.rotated_from AND p.revoked_at IS NULL AND p.expires_at <= $1)
         RETURNING id",
        &[&now],
    )
    .await?;
    let mut out = Vec::with_capacity(resolved.len());
    for r in &resolved {
        let id: String = r.try_get(0)?;
        out.extend(rotation(c, &id).await?);
    }
    Ok(out)
}

/// Confirms the pending rotation to `successor_id` in the transaction `c` (see the SQLite
/// twin); the predecessor's id, or None.
pub(super) async fn confirm(
    c: &impl GenericClient,
    successor_id: &str,
    hash: &str,
    principal: &str,
    now: i64,
) -> Pg<Option<String>> {
    let found = row(
        c,
        "SELECT s.rotated_from FROM api_token s JOIN api_token p ON p.id = s.rotated_from
         WHERE s.id = $1 AND s.secret_hash = $2 AND s.principal = $3 AND s.revoked_at IS NULL AND s.expires_at > $4
           AND s.rotation_resolution IS NULL AND p.revoked_at IS NULL AND p.expires_at > $4
         FOR UPDATE OF s",
        &[&successor_id, &hash, &principal, &now],
    )
    .await?;
    let Some(predecessor) = found.map(|r| r.try_get::<_, Option<String>>(0)).transpose()?.flatten() else {
        return Ok(None);
    };
    execute(c, "UPDATE api_token SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL", &[&predecessor, &now])
        .await?;
    execute(
        c,
        "UPDATE api_token SET rotation_resolution = 'confirmed', rotation_resolved_at = $2 WHERE id = $1",
        &[&successor_id, &now],
    )
    .await?;
    Ok(Some(predecessor))
}

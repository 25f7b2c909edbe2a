//! Principals and their API tokens in SQLite.

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use toolgate_domain::StoreError;
use toolgate_domain::engines::{EngineRefusal, PrincipalKind};
use toolgate_domain::groups::GroupRefusal;
use toolgate_domain::records::Change;
use toolgate_domain::secrets::{hash_secret, new_secret, random_hex};
use toolgate_domain::tokens::{Authentication, NewToken, PrincipalRecord, Rotation, TOKEN_PREFIX, TokenRecord};

use super::SqliteStore;
use crate::CredentialStore;
use crate::rules::token_refusal;

type Result<T> = std::result::Result<T, StoreError>;

const TOKEN_COLUMNS: &str = "id, name, principal, tier, created_at, expires_at, revoked_at, toolsets";

fn roles_of(text: String) -> Vec<String> {
    text.split(',').filter(|r| !r.is_empty()).map(str::to_string).collect()
}

/// The columns [`principal_row`] reads.
pub(super) const PRINCIPAL_COLUMNS: &str = "name, roles, created_at, kind";

pub(super) fn principal_row(r: &rusqlite::Row) -> rusqlite::Result<PrincipalRecord> {
    Ok(PrincipalRecord {
        name: r.get(0)?,
        roles: roles_of(r.get(1)?),
        group_roles: vec![],
        created_at: r.get(2)?,
        kind: PrincipalKind::from_label(&r.get::<_, String>(3)?),
    })
}

/// The principal's row with the roles it holds on groups.
fn with_group_roles(conn: &Connection, found: Option<PrincipalRecord>) -> rusqlite::Result<Option<PrincipalRecord>> {
    found
        .map(|mut p| {
            p.group_roles = super::groups::roles_of_principal(conn, &p.name)?;
            Ok(p)
        })
        .transpose()
}

fn token_row(r: &rusqlite::Row) -> rusqlite::Result<TokenRecord> {
    Ok(TokenRecord {
        id: r.get(0)?,
        name: r.get(1)?,
        principal: r.get(2)?,
        tier: r.get(3)?,
        created_at: r.get(4)?,
        expires_at: r.get(5)?,
        revoked_at: r.get(6)?,
        toolsets: r.get(7)?,
    })
}

pub(super) fn principal_by_name(conn: &Connection, name: &str) -> rusqlite::Result<Option<PrincipalRecord>> {
    let found = conn
        .query_row(&format!("SELECT {PRINCIPAL_COLUMNS} FROM principal WHERE name = ?1"), params![name], principal_row)
        .optional()?;
    with_group_roles(conn, found)
}

/// Every principal, by name, with the roles it holds on groups.
pub(super) fn all_principals(c: &Connection) -> rusqlite::Result<Vec<PrincipalRecord>> {
    let mut stmt = c.prepare(&format!("SELECT {PRINCIPAL_COLUMNS} FROM principal ORDER BY name"))?;
    let found = stmt.query_map([], principal_row)?.collect::<rusqlite::Result<Vec<_>>>()?;
    found.into_iter().filter_map(|p| with_group_roles(c, Some(p)).transpose()).collect()
}

/// Every token (of `principal`, when given), oldest first.
pub(super) fn tokens_of(c: &Connection, principal: Option<&str>) -> rusqlite::Result<Vec<TokenRecord>> {
    let mut stmt = c.prepare(&format!(
        "SELECT {TOKEN_COLUMNS} FROM api_token WHERE ?1 IS NULL OR principal = ?1 ORDER BY created_at, id"
    ))?;
    stmt.query_map(params![principal], token_row)?.collect()
}

/// Why `name` may not be removed: it is an engine principal, or it owns live ones.
fn removal_refusal(c: &Connection, name: &str) -> rusqlite::Result<Option<EngineRefusal>> {
    if principal_by_name(c, name)?.is_some_and(|p| p.kind == PrincipalKind::Engine) {
        return Ok(Some(EngineRefusal::IsEngine(name.to_string())));
    }
    let owned = super::engines::owned_by(c, name)?;
    Ok((!owned.is_empty()).then(|| EngineRefusal::OwnsEngines { owner: name.to_string(), engines: owned.join(", ") }))
}

/// Inserts a token row; returns the record and its secret.
fn insert_token(conn: &Connection, new: &OwnedToken) -> rusqlite::Result<(TokenRecord, String)> {
    let secret = new_secret(TOKEN_PREFIX);
    let id = format!("tok_{}", random_hex::<8>());
    conn.execute(
        "INSERT INTO api_token (id, name, principal, tier, secret_hash, created_at, expires_at, toolsets) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![id, new.name, new.principal, new.tier, hash_secret(&secret), new.now, new.expires_at, new.toolsets],
    )?;
    let record = TokenRecord {
        id,
        name: new.name.clone(),
        principal: new.principal.clone(),
        tier: new.tier.clone(),
        created_at: new.now,
        expires_at: new.expires_at,
        revoked_at: None,
        toolsets: new.toolsets.clone(),
    };
    Ok((record, secret))
}

/// [`NewToken`] with owned fields, to cross into the blocking pool.
struct OwnedToken {
    principal: String,
    tier: Option<String>,
    name: String,
    now: i64,
    expires_at: i64,
    toolsets: Option<String>,
}

#[async_trait]
impl CredentialStore for SqliteStore {
    async fn principal_count(&self) -> Result<i64> {
        self.run(|c| c.query_row("SELECT count(*) FROM principal", [], |r| r.get(0))).await
    }

    async fn put_principal(&self, name: &str, roles: &[String], now: i64) -> Result<()> {
        let (name, roles) = (name.to_string(), roles.join(","));
        self.run(move |c| {
            c.execute(
                "INSERT INTO principal (name, roles, created_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE SET roles = excluded.roles",
                params![name, roles, now],
            )
            .map(drop)
        })
        .await
    }

    async fn principal(&self, name: &str) -> Result<Option<PrincipalRecord>> {
        let name = name.to_string();
        self.run(move |c| principal_by_name(c, &name)).await
    }

    async fn principals(&self) -> Result<Vec<PrincipalRecord>> {
        self.run(|c| all_principals(c)).await
    }

    async fn remove_principal(&self, name: &str, now: i64) -> Result<std::result::Result<bool, EngineRefusal>> {
        let name = name.to_string();
        self.run(move |c| {
            let tx = c.transaction()?;
            if let Some(refusal) = removal_refusal(&tx, &name)? {
                return Ok(Err(refusal));
            }
            tx.execute(
                "UPDATE api_token SET revoked_at = ?2 WHERE principal = ?1 AND revoked_at IS NULL",
                params![name, now],
            )?;
            let removed = tx.execute("DELETE FROM principal WHERE name = ?1", params![name])? == 1;
            tx.execute("DELETE FROM principal_sign_in WHERE principal = ?1", params![name])?;
            tx.execute("DELETE FROM group_role WHERE principal = ?1", params![name])?;
            // Its IdP subjects may not come back as new principals on their next sign-in.
            tx.execute(
                "INSERT INTO federated_tombstone (issuer, subject, principal, removed_at) \
                 SELECT issuer, subject, principal, ?2 FROM federated_identity WHERE principal = ?1 \
                 ON CONFLICT (issuer, subject) DO UPDATE SET principal = excluded.principal, removed_at = excluded.removed_at",
                params![name, now],
            )?;
            tx.execute("DELETE FROM federated_identity WHERE principal = ?1", params![name])?;
            tx.commit()?;
            Ok(Ok(removed))
        })
        .await
    }

    async fn create_token(&self, new: NewToken<'_>) -> Result<(TokenRecord, String)> {
        let new = OwnedToken {
            principal: new.principal.into(),
            tier: new.tier.map(str::to_string),
            name: new.name.into(),
            now: new.now,
            expires_at: new.expires_at,
            toolsets: new.toolsets.map(str::to_string),
        };
        self.run(move |c| insert_token(c, &new)).await
    }

    async fn authenticate(&self, secret: &str, now: i64) -> Result<Authentication> {
        let hash = hash_secret(secret);
        self.run(move |c| {
            let token = c
                .query_row(
                    &format!("SELECT {TOKEN_COLUMNS} FROM api_token WHERE secret_hash = ?1"),
                    params![hash],
                    token_row,
                )
                .optional()?;
            let Some(token) = token else { return Ok(Authentication::Unknown) };
            if let Some(refusal) = token_refusal(&token, now) {
                return Ok(refusal);
            }
            match principal_by_name(c, &token.principal)? {
                Some(principal) => Ok(Authentication::Valid { token, principal }),
                // The principal was removed: its tokens die with it.
                None => Ok(Authentication::Revoked),
            }
        })
        .await
    }

    async fn token(&self, id: &str) -> Result<Option<TokenRecord>> {
        let id = id.to_string();
        self.run(move |c| {
            c.query_row(&format!("SELECT {TOKEN_COLUMNS} FROM api_token WHERE id = ?1"), params![id], token_row)
                .optional()
        })
        .await
    }

    async fn rotate_token(
        &self,
        predecessor: &TokenRecord,
        overlap_secs: i64,
        successor_expires_at: i64,
        now: i64,
    ) -> Result<(TokenRecord, String)> {
        let predecessor = predecessor.clone();
        self.run(move |c| {
            let tx = c.transaction()?;
            let new = OwnedToken {
                principal: predecessor.principal.clone(),
                tier: predecessor.tier.clone(),
                name: format!("{} (rotated)", predecessor.name),
                now,
                expires_at: successor_expires_at,
                toolsets: predecessor.toolsets.clone(),
            };
            let (successor, secret) = insert_token(&tx, &new)?;
            tx.execute("UPDATE api_token SET rotated_from = ?2 WHERE id = ?1", params![successor.id, predecessor.id])?;
            tx.execute(
                "UPDATE api_token SET expires_at = min(expires_at, ?2) WHERE id = ?1",
                params![predecessor.id, now + overlap_secs],
            )?;
            tx.commit()?;
            Ok((successor, secret))
        })
        .await
    }

    async fn rotation(&self, successor_id: &str) -> Result<Option<Rotation>> {
        let id = successor_id.to_string();
        self.run(move |c| super::rotations::rotation(c, &id)).await
    }

    async fn rotations(&self, principal: &str) -> Result<Vec<Rotation>> {
        let principal = principal.to_string();
        self.run(move |c| super::rotations::rotations(c, &principal)).await
    }

    async fn resolve_lapsed_rotations(&self, now: i64) -> Result<Vec<Rotation>> {
        self.run(move |c| super::rotations::resolve_lapsed(c, now)).await
    }

    async fn confirm_rotation(
        &self,
        successor_id: &str,
        secret: &str,
        principal: &str,
        now: i64,
    ) -> Result<Option<String>> {
        let (successor_id, hash, principal) = (successor_id.to_string(), hash_secret(secret), principal.to_string());
        self.run(move |c| super::rotations::confirm(c, &successor_id, &hash, &principal, now)).await
    }

    async fn tokens(&self, principal: Option<&str>) -> Result<Vec<TokenRecord>> {
        let principal = principal.map(str::to_string);
        self.run(move |c| tokens_of(c, principal.as_deref())).await
    }

    async fn revoke_token(&self, id: &str, now: i64) -> Result<bool> {
        let id = id.to_string();
        self.run(move |c| {
            c.execute("UPDATE api_token SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL", params![id, now])
                .map(|changed| changed == 1)
        })
        .await
    }

    async fn assign_group_role(
        &self,
        principal: &str,
        group_id: &str,
        role: &str,
        change: Change<'_>,
    ) -> Result<std::result::Result<bool, GroupRefusal>> {
        let (principal, group_id, role, at, by) =
            (principal.to_string(), group_id.to_string(), role.to_string(), change.at, change.by.to_string());
        self.run(move |c| super::groups::assign_role(c, &principal, &group_id, &role, &Change { at, by: &by })).await
    }

    async fn unassign_group_role(&self, principal: &str, group_id: &str, role: &str) -> Result<bool> {
        let (principal, group_id, role) = (principal.to_string(), group_id.to_string(), role.to_string());
        self.run(move |c| super::groups::unassign_role(c, &principal, &group_id, &role)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The behaviour of every backend is in tests/backends/; this is SQLite's own file.
    #[tokio::test]
    async fn the_secret_is_never_stored_in_clear() {
        let store = SqliteStore::open_in_memory().unwrap();
        store.put_principal("alice", &["Viewer".into()], 0).await.unwrap();
        let new =
            NewToken { principal: "alice", tier: Some("readonly"), name: "t", now: 0, expires_at: 100, toolsets: None };
        let (_, secret) = store.create_token(new).await.unwrap();
        let tail = secret[TOKEN_PREFIX.len()..].to_string();
        let stored: String =
            store.run(|c| c.query_row("SELECT secret_hash FROM api_token", [], |r| r.get(0))).await.unwrap();
        assert!(!stored.contains(&tail), "the secret is never stored in clear");
    }
}

//! Principals and their API tokens. A token is shown once, at creation; the store keeps only
//! its SHA-256 (tokens are 256 random bits, so a fast hash is the right one).

use rusqlite::{OptionalExtension, params};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{Store, StoreError};

/// What every token secret starts with, so scanners and people recognise one.
pub const TOKEN_PREFIX: &str = "tg_";

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PrincipalRecord {
    pub name: String,
    pub roles: Vec<String>,
    pub created_at: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TokenRecord {
    pub id: String,
    pub name: String,
    pub principal: String,
    /// The MCP tier; `None` for an administrator credential that cannot call tools.
    pub tier: Option<String>,
    pub created_at: i64,
    pub expires_at: i64,
    pub revoked_at: Option<i64>,
}

/// The result of presenting a secret. Callers answer every failure alike (401).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Authentication {
    Valid { token: TokenRecord, principal: PrincipalRecord },
    Unknown,
    Revoked,
    Expired,
}

pub fn hash_secret(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `n` random bytes from the operating system.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf).expect("the operating system's random source works");
    buf
}

fn roles_of(text: String) -> Vec<String> {
    text.split(',').filter(|r| !r.is_empty()).map(str::to_string).collect()
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
    })
}

const TOKEN_COLUMNS: &str = "id, name, principal, tier, created_at, expires_at, revoked_at";

impl Store {
    pub fn principal_count(&self) -> Result<i64, StoreError> {
        Ok(self.conn()?.query_row("SELECT count(*) FROM principal", [], |r| r.get(0))?)
    }

    /// Adds a principal, or replaces its roles.
    pub fn put_principal(&self, name: &str, roles: &[String], now: i64) -> Result<(), StoreError> {
        self.conn()?.execute(
            "INSERT INTO principal (name, roles, created_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (name) DO UPDATE SET roles = excluded.roles",
            params![name, roles.join(","), now],
        )?;
        Ok(())
    }

    pub fn principal(&self, name: &str) -> Result<Option<PrincipalRecord>, StoreError> {
        Ok(self
            .conn()?
            .query_row("SELECT name, roles, created_at FROM principal WHERE name = ?1", params![name], |r| {
                Ok(PrincipalRecord { name: r.get(0)?, roles: roles_of(r.get(1)?), created_at: r.get(2)? })
            })
            .optional()?)
    }

    pub fn principals(&self) -> Result<Vec<PrincipalRecord>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare("SELECT name, roles, created_at FROM principal ORDER BY name")?;
        let rows = stmt.query_map([], |r| {
            Ok(PrincipalRecord { name: r.get(0)?, roles: roles_of(r.get(1)?), created_at: r.get(2)? })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Removes a principal and revokes its tokens; false when there is none.
    pub fn remove_principal(&self, name: &str, now: i64) -> Result<bool, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction()?;
        tx.execute(
            "UPDATE api_token SET revoked_at = ?2 WHERE principal = ?1 AND revoked_at IS NULL",
            params![name, now],
        )?;
        let removed = tx.execute("DELETE FROM principal WHERE name = ?1", params![name])? == 1;
        tx.commit()?;
        Ok(removed)
    }

    /// Creates a token; returns its record and the secret, which is never stored.
    pub fn create_token(
        &self,
        principal: &str,
        tier: Option<&str>,
        name: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<(TokenRecord, String), StoreError> {
        use base64::Engine as _;
        let secret =
            format!("{TOKEN_PREFIX}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random_bytes::<32>()));
        let id = format!("tok_{}", hex(&random_bytes::<8>()));
        self.conn()?.execute(
            "INSERT INTO api_token (id, name, principal, tier, secret_hash, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![id, name, principal, tier, hash_secret(&secret), now, expires_at],
        )?;
        let record = TokenRecord {
            id,
            name: name.into(),
            principal: principal.into(),
            tier: tier.map(str::to_string),
            created_at: now,
            expires_at,
            revoked_at: None,
        };
        Ok((record, secret))
    }

    pub fn authenticate(&self, secret: &str, now: i64) -> Result<Authentication, StoreError> {
        let conn = self.conn()?;
        let token = conn
            .query_row(
                &format!("SELECT {TOKEN_COLUMNS} FROM api_token WHERE secret_hash = ?1"),
                params![hash_secret(secret)],
                token_row,
            )
            .optional()?;
        let Some(token) = token else { return Ok(Authentication::Unknown) };
        if token.revoked_at.is_some() {
            return Ok(Authentication::Revoked);
        }
        if token.expires_at <= now {
            return Ok(Authentication::Expired);
        }
        drop(conn);
        match self.principal(&token.principal)? {
            Some(principal) => Ok(Authentication::Valid { token, principal }),
            // The principal was removed: its tokens die with it.
            None => Ok(Authentication::Revoked),
        }
    }

    pub fn token(&self, id: &str) -> Result<Option<TokenRecord>, StoreError> {
        Ok(self
            .conn()?
            .query_row(&format!("SELECT {TOKEN_COLUMNS} FROM api_token WHERE id = ?1"), params![id], token_row)
            .optional()?)
    }

    /// Mints the successor of `predecessor` (same principal, tier and expiry) and shortens the
    /// predecessor's life to the overlap. Returns the successor and its secret.
    pub fn rotate_token(
        &self,
        predecessor: &TokenRecord,
        overlap_secs: i64,
        now: i64,
    ) -> Result<(TokenRecord, String), StoreError> {
        let (successor, secret) = self.create_token(
            &predecessor.principal,
            predecessor.tier.as_deref(),
            &format!("{} (rotated)", predecessor.name),
            now,
            predecessor.expires_at,
        )?;
        let conn = self.conn()?;
        conn.execute("UPDATE api_token SET rotated_from = ?2 WHERE id = ?1", params![successor.id, predecessor.id])?;
        conn.execute(
            "UPDATE api_token SET expires_at = min(expires_at, ?2) WHERE id = ?1",
            params![predecessor.id, now + overlap_secs],
        )?;
        Ok((successor, secret))
    }

    /// Confirms a rotation with the successor's secret: the predecessor is revoked. Returns the
    /// predecessor's id, or None when `secret` is not the successor's or there was no rotation.
    pub fn confirm_rotation(
        &self,
        successor_id: &str,
        secret: &str,
        principal: &str,
        now: i64,
    ) -> Result<Option<String>, StoreError> {
        let conn = self.conn()?;
        let predecessor: Option<Option<String>> = conn
            .query_row(
                "SELECT rotated_from FROM api_token WHERE id = ?1 AND secret_hash = ?2 AND principal = ?3 AND revoked_at IS NULL AND expires_at > ?4",
                params![successor_id, hash_secret(secret), principal, now],
                |r| r.get(0),
            )
            .optional()?;
        let Some(Some(predecessor)) = predecessor else { return Ok(None) };
        conn.execute(
            "UPDATE api_token SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
            params![predecessor, now],
        )?;
        Ok(Some(predecessor))
    }

    pub fn tokens(&self, principal: Option<&str>) -> Result<Vec<TokenRecord>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(&format!(
            "SELECT {TOKEN_COLUMNS} FROM api_token WHERE ?1 IS NULL OR principal = ?1 ORDER BY created_at, id"
        ))?;
        let rows = stmt.query_map(params![principal], token_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Revokes a token; false when there is no such (unrevoked) token.
    pub fn revoke_token(&self, id: &str, now: i64) -> Result<bool, StoreError> {
        let changed = self
            .conn()?
            .execute("UPDATE api_token SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL", params![id, now])?;
        Ok(changed == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_authenticate_until_revoked_or_expired() {
        let store = Store::open_in_memory().unwrap();
        store.put_principal("alice", &["Viewer".into()], 0).unwrap();
        let (record, secret) = store.create_token("alice", Some("readonly"), "t", 0, 100).unwrap();
        assert!(secret.starts_with(TOKEN_PREFIX) && secret.len() > 40);
        assert!(matches!(store.authenticate(&secret, 50).unwrap(), Authentication::Valid { .. }));
        assert_eq!(store.authenticate(&secret, 100).unwrap(), Authentication::Expired);
        assert_eq!(store.authenticate("tg_nope", 50).unwrap(), Authentication::Unknown);
        assert!(store.revoke_token(&record.id, 60).unwrap());
        assert!(!store.revoke_token(&record.id, 61).unwrap());
        assert_eq!(store.authenticate(&secret, 50).unwrap(), Authentication::Revoked);
        let stored: String =
            store.conn().unwrap().query_row("SELECT secret_hash FROM api_token", [], |r| r.get(0)).unwrap();
        assert!(!stored.contains(&secret[3..]), "the secret is never stored in clear");
    }
}

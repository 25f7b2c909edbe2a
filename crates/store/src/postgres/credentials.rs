//! Principals (with their roles on groups) and API tokens on PostgreSQL.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use toolgate_domain::StoreError;
use toolgate_domain::engines::{EngineRefusal, PrincipalKind};
use toolgate_domain::secrets::{hash_secret, new_secret, random_hex};
use toolgate_domain::tokens::{Authentication, NewToken, PrincipalRecord, Rotation, TOKEN_PREFIX, TokenRecord};

use super::{Pg, PostgresStore, execute, pg, row, rows};
use crate::CredentialStore;
use crate::changes::Change;
use crate::rules::token_refusal;

type Result<T> = std::result::Result<T, StoreError>;

const TOKEN_COLUMNS: &str = "id, name, principal, tier, created_at, expires_at, revoked_at, toolsets";

/// The columns [`principal_row`] reads.
const PRINCIPAL_COLUMNS: &str = "name, roles, created_at, kind";

fn principal_row(r: &tokio_postgres::Row) -> Pg<PrincipalRecord> {
    let roles: String = r.try_get(1)?;
    Ok(PrincipalRecord {
        name: r.try_get(0)?,
        roles: roles.split(',').filter(|r| !r.is_empty()).map(str::to_string).collect(),
        group_roles: vec![],
        created_at: r.try_get(2)?,
        kind: PrincipalKind::from_label(r.try_get(3)?),
    })
}

fn token_row(r: &tokio_postgres::Row) -> Pg<TokenRecord> {
    Ok(TokenRecord {
        id: r.try_get(0)?,
        name: r.try_get(1)?,
        principal: r.try_get(2)?,
        tier: r.try_get(3)?,
        created_at: r.try_get(4)?,
        expires_at: r.try_get(5)?,
        revoked_at: r.try_get(6)?,
        toolsets: r.try_get(7)?,
    })
}

pub(super) async fn principal_by_name(c: &impl GenericClient, name: &str) -> Pg<Option<PrincipalRecord>> {
    let found = row(c, &format!("SELECT {PRINCIPAL_COLUMNS} FROM principal WHERE name = $1"), &[&name])
        .await?
        .as_ref()
        .map(principal_row)
        .transpose()?;
    match found {
        Some(p) => Ok(Some(with_group_roles(c, p).await?)),
        None => Ok(None),
    }
}

/// The principal's row with the roles it holds on groups.
async fn with_group_roles(c: &impl GenericClient, mut principal: PrincipalRecord) -> Pg<PrincipalRecord> {
    principal.group_roles = super::groups::roles_of_principal(c, &principal.name).await?;
    Ok(principal)
}

/// Every principal, by name, with the roles it holds on groups.
pub(super) async fn all_principals(c: &impl GenericClient) -> Pg<Vec<PrincipalRecord>> {
    let found = rows(c, &format!("SELECT {PRINCIPAL_COLUMNS} FROM principal ORDER BY name"), &[])
        .await?
        .iter()
        .map(principal_row)
        .collect::<Pg<Vec<_>>>()?;
    let mut principals = Vec::with_capacity(found.len());
    for principal in found {
        principals.push(with_group_roles(c, principal).await?);
    }
    Ok(principals)
}

/// Every token (of `principal`, when given), oldest first.
pub(super) async fn tokens_of(c: &impl GenericClient, principal: Option<&str>) -> Pg<Vec<TokenRecord>> {
    let sql = format!(
        "SELECT {TOKEN_COLUMNS} FROM api_token WHERE $1::text IS NULL OR principal = $1 ORDER BY created_at, id"
    );
    rows(c, &sql, &[&principal]).await?.iter().map(token_row).collect()
}

/// Inserts a token row; returns the record and its secret.
async fn insert_token(c: &impl GenericClient, new: NewToken<'_>) -> Pg<(TokenRecord, String)> {
    let secret = new_secret(TOKEN_PREFIX);
    let id = format!("tok_{}", random_hex::<8>());
    execute(
        c,
        "INSERT INTO api_token (id, name, principal, tier, secret_hash, created_at, expires_at, toolsets) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        &[&id, &new.name, &new.principal, &new.tier, &hash_secret(&secret), &new.now, &new.expires_at, &new.toolsets],
    )
    .await?;
    let record = TokenRecord {
        id,
        name: new.name.to_string(),
        principal: new.principal.to_string(),
        tier: new.tier.map(str::to_string),
        created_at: new.now,
        expires_at: new.expires_at,
        revoked_at: None,
        toolsets: new.toolsets.map(str::to_string),
    };
    Ok((record, secret))
}

#[async_trait]
impl CredentialStore for PostgresStore {
    async fn principal_count(&self) -> Result<i64> {
        pg(async { Ok(self.conn().await?.query_one("SELECT count(*) FROM principal", &[]).await?.try_get(0)?) }).await
    }

    async fn put_principal(&self, name: &str, roles: &[String], now: i64) -> Result<()> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            execute(
                &tx,
                "INSERT INTO principal (name, roles, created_at) VALUES ($1, $2, $3)
                 ON CONFLICT (name) DO UPDATE SET roles = excluded.roles",
                &[&name, &roles.join(","), &now],
            )
            .await?;
            self.notify(&tx, Change::Credentials).await?;
            Ok(tx.commit().await?)
        })
        .await
    }

    async fn principal(&self, name: &str) -> Result<Option<PrincipalRecord>> {
        pg(async { principal_by_name(&*self.conn().await?, name).await }).await
    }

    async fn principals(&self) -> Result<Vec<PrincipalRecord>> {
        pg(async { all_principals(&*self.conn().await?).await }).await
    }

    async fn remove_principal(&self, name: &str, now: i64) -> Result<std::result::Result<bool, EngineRefusal>> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            if principal_by_name(&tx, name).await?.is_some_and(|p| p.kind == PrincipalKind::Engine) {
                return Ok(Err(EngineRefusal::IsEngine(name.to_string())));
            }
            let owned = super::engines::owned_by(&tx, name).await?;
            if !owned.is_empty() {
                return Ok(Err(EngineRefusal::OwnsEngines { owner: name.to_string(), engines: owned.join(", ") }));
            }
            execute(
                &tx,
                "UPDATE api_token SET revoked_at = $2 WHERE principal = $1 AND revoked_at IS NULL",
                &[&name, &now],
            )
            .await?;
            let removed = execute(&tx, "DELETE FROM principal WHERE name = $1", &[&name]).await? == 1;
            execute(&tx, "DELETE FROM principal_sign_in WHERE principal = $1", &[&name]).await?;
            execute(&tx, "DELETE FROM group_role WHERE principal = $1", &[&name]).await?;
            // Its IdP subjects may not come back as new principals on their next sign-in.
            execute(
                &tx,
                "INSERT INTO federated_tombstone (issuer, subject, principal, removed_at) \
                 SELECT issuer, subject, principal, $2 FROM federated_identity WHERE principal = $1 \
                 ON CONFLICT (issuer, subject) DO UPDATE SET principal = excluded.principal, removed_at = excluded.removed_at",
                &[&name, &now],
            )
            .await?;
            execute(&tx, "DELETE FROM federated_identity WHERE principal = $1", &[&name]).await?;
            self.notify(&tx, Change::Credentials).await?;
            tx.commit().await?;
            Ok(Ok(removed))
        })
        .await
    }

    async fn create_token(&self, new: NewToken<'_>) -> Result<(TokenRecord, String)> {
        pg(async { insert_token(&*self.conn().await?, new).await }).await
    }

    async fn authenticate(&self, secret: &str, now: i64) -> Result<Authentication> {
        let hash = hash_secret(secret);
        pg(async {
            let c = self.conn().await?;
            let sql = format!("SELECT {TOKEN_COLUMNS} FROM api_token WHERE secret_hash = $1");
            let Some(token) = row(&*c, &sql, &[&hash]).await?.as_ref().map(token_row).transpose()? else {
                return Ok(Authentication::Unknown);
            };
            if let Some(refusal) = token_refusal(&token, now) {
                return Ok(refusal);
            }
            Ok(match principal_by_name(&*c, &token.principal).await? {
                Some(principal) => Authentication::Valid { token, principal },
                // The principal was removed: its tokens die with it.
                None => Authentication::Revoked,
            })
        })
        .await
    }

    async fn token(&self, id: &str) -> Result<Option<TokenRecord>> {
        pg(async {
            let c = self.conn().await?;
            row(&*c, &format!("SELECT {TOKEN_COLUMNS} FROM api_token WHERE id = $1"), &[&id])
                .await?
                .as_ref()
                .map(token_row)
                .transpose()
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
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            let name = format!("{} (rotated)", predecessor.name);
            let new = NewToken {
                principal: &predecessor.principal,
                tier: predecessor.tier.as_deref(),
                name: &name,
                now,
                expires_at: successor_expires_at,
                toolsets: predecessor.toolsets.as_deref(),
            };
            let (successor, secret) = insert_token(&tx, new).await?;
            execute(&tx, "UPDATE api_token SET rotated_from = $2 WHERE id = $1", &[&successor.id, &predecessor.id])
                .await?;
            execute(
                &tx,
                "UPDATE api_token SET expires_at = least(expires_at, $2) WHERE id = $1",
                &[&predecessor.id, &(now + overlap_secs)],
            )
            .await?;
            self.notify(&tx, Change::Credentials).await?;
            tx.commit().await?;
            Ok((successor, secret))
        })
        .await
    }

    async fn rotation(&self, successor_id: &str) -> Result<Option<Rotation>> {
        pg(async { super::rotations::rotation(&*self.conn().await?, successor_id).await }).await
    }

    async fn rotations(&self, principal: &str) -> Result<Vec<Rotation>> {
        pg(async { super::rotations::rotations(&*self.conn().await?, principal).await }).await
    }

    async fn resolve_lapsed_rotations(&self, now: i64) -> Result<Vec<Rotation>> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            let resolved = super::rotations::resolve_lapsed(&tx, now).await?;
            tx.commit().await?;
            Ok(resolved)
        })
        .await
    }

    async fn confirm_rotation(
        &self,
        successor_id: &str,
        secret: &str,
        principal: &str,
        now: i64,
    ) -> Result<Option<String>> {
        let hash = hash_secret(secret);
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            let confirmed = super::rotations::confirm(&tx, successor_id, &hash, principal, now).await?;
            if confirmed.is_some() {
                self.notify(&tx, Change::Credentials).await?;
            }
            tx.commit().await?;
            Ok(confirmed)
        })
        .await
    }

    async fn tokens(&self, principal: Option<&str>) -> Result<Vec<TokenRecord>> {
        pg(async { tokens_of(&*self.conn().await?, principal).await }).await
    }

    async fn revoke_token(&self, id: &str, now: i64) -> Result<bool> {
        pg(self.update_announcing(
            "UPDATE api_token SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
            &[&id, &now],
            Change::Credentials,
        ))
        .await
    }

    async fn assign_group_role(
        &self,
        principal: &str,
        group_id: &str,
        role: &str,
        change: toolgate_domain::records::Change<'_>,
    ) -> Result<std::result::Result<bool, toolgate_domain::groups::GroupRefusal>> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            let added = super::groups::assign_role(&tx, principal, group_id, role, &change).await?;
            if added == Ok(true) {
                self.notify(&tx, Change::Credentials).await?;
            }
            tx.commit().await?;
            Ok(added)
        })
        .await
    }

    async fn unassign_group_role(&self, principal: &str, group_id: &str, role: &str) -> Result<bool> {
        pg(async {
            self.update_announcing(
                "DELETE FROM group_role WHERE principal = $1 AND group_id = $2 AND role = $3",
                &[&principal, &group_id, &role],
                Change::Credentials,
            )
            .await
        })
        .await
    }
}

//! Engine principals on PostgreSQL (see [`crate::EngineStore`] and the SQLite twin). A
//! revocation tells every replica's credential cache.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use toolgate_domain::engines::{EngineRecord, EngineRefusal, NewEngine, PrincipalKind};

use super::credentials::principal_by_name;
use super::{Pg, PostgresStore, execute, pg, row, rows};
use crate::changes::Change;
use crate::engines::{ENGINE_COLUMNS, EngineRevoked, EngineStore, Refusable, Result, RevokeEngine};

/// PostgreSQL's `INTEGER` is signed; quotas never come near its end.
fn quota(value: Option<i32>) -> Option<u32> {
    value.and_then(|v| u32::try_from(v).ok())
}

fn stored(value: Option<u32>) -> Option<i32> {
    value.map(|v| i32::try_from(v).unwrap_or(i32::MAX))
}

fn engine_row(r: &tokio_postgres::Row) -> Pg<EngineRecord> {
    Ok(EngineRecord {
        principal_id: r.try_get(0)?,
        display_name: r.try_get(1)?,
        owner: r.try_get(2)?,
        justification: r.try_get(3)?,
        classification: r.try_get(4)?,
        created_at: r.try_get(5)?,
        created_by: r.try_get(6)?,
        revoked_at: r.try_get(7)?,
        revoke_reason: r.try_get(8)?,
        superseded_by: r.try_get(9)?,
        requests_per_minute: quota(r.try_get(10)?),
        concurrent_requests: quota(r.try_get(11)?),
    })
}

async fn engine_by_id(c: &impl GenericClient, id: &str, lock: bool) -> Pg<Option<EngineRecord>> {
    let sql = format!(
        "SELECT {ENGINE_COLUMNS} FROM engine_principal WHERE principal_id = $1{}",
        if lock { " FOR UPDATE" } else { "" }
    );
    row(c, &sql, &[&id]).await?.as_ref().map(engine_row).transpose()
}

async fn person(c: &impl GenericClient, name: &str) -> Pg<std::result::Result<(), EngineRefusal>> {
    Ok(match principal_by_name(c, name).await? {
        None => Err(EngineRefusal::UnknownOwner(name.to_string())),
        Some(p) if p.kind == PrincipalKind::Engine => Err(EngineRefusal::OwnerIsEngine(name.to_string())),
        Some(_) => Ok(()),
    })
}

/// The live engine principals `owner` owns, by id.
pub(super) async fn owned_by(c: &impl GenericClient, owner: &str) -> Pg<Vec<String>> {
    let sql = "SELECT principal_id FROM engine_principal WHERE owner = $1 AND revoked_at IS NULL ORDER BY principal_id";
    rows(c, sql, &[&owner]).await?.iter().map(|r| Ok(r.try_get(0)?)).collect()
}

#[async_trait]
impl EngineStore for PostgresStore {
    async fn create_engine(&self, new: NewEngine<'_>) -> Refusable<EngineRecord> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            if let Err(refusal) = person(&tx, new.owner).await? {
                return Ok(Err(refusal));
            }
            let inserted = execute(
                &tx,
                "INSERT INTO principal (name, roles, created_at, kind) VALUES ($1, '', $2, 'engine') ON CONFLICT (name) DO NOTHING",
                &[&new.principal_id, &new.now],
            )
            .await?;
            if inserted == 0 {
                return Ok(Err(EngineRefusal::NameTaken(new.principal_id.to_string())));
            }
            let sql = format!(
                "INSERT INTO engine_principal ({ENGINE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, NULL, NULL, NULL, $8, $9)"
            );
            let (per_minute, concurrent) = (stored(new.requests_per_minute), stored(new.concurrent_requests));
            execute(
                &tx,
                &sql,
                &[
                    &new.principal_id,
                    &new.display_name,
                    &new.owner,
                    &new.justification,
                    &new.classification,
                    &new.now,
                    &new.created_by,
                    &per_minute,
                    &concurrent,
                ],
            )
            .await?;
            let record = engine_by_id(&tx, new.principal_id, false).await?.expect("inserted above");
            tx.commit().await?;
            Ok(Ok(record))
        })
        .await
    }

    async fn engine(&self, principal_id: &str) -> Result<Option<EngineRecord>> {
        pg(async { engine_by_id(&*self.conn().await?, principal_id, false).await }).await
    }

    async fn engines(&self, include_revoked: bool) -> Result<Vec<EngineRecord>> {
        pg(async {
            let c = self.conn().await?;
            let sql = format!(
                "SELECT {ENGINE_COLUMNS} FROM engine_principal WHERE $1 OR revoked_at IS NULL ORDER BY principal_id"
            );
            rows(&*c, &sql, &[&include_revoked]).await?.iter().map(engine_row).collect()
        })
        .await
    }

    async fn revoke_engine(&self, revoke: RevokeEngine<'_>) -> Refusable<EngineRevoked> {
        let id = revoke.principal_id;
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            let Some(before) = engine_by_id(&tx, id, true).await? else {
                return Ok(Err(EngineRefusal::Unknown(id.to_string())));
            };
            if let Some(successor) = revoke.superseded_by
                && (successor == id || engine_by_id(&tx, successor, false).await?.is_none())
            {
                return Ok(Err(EngineRefusal::Unknown(successor.to_string())));
            }
            if before.is_revoked() {
                return Ok(Ok(EngineRevoked { record: before, changed: false, credentials_revoked: 0 }));
            }
            execute(
                &tx,
                "UPDATE engine_principal SET revoked_at = $2, revoke_reason = $3, superseded_by = $4 WHERE principal_id = $1",
                &[&id, &revoke.now, &revoke.reason, &revoke.superseded_by],
            )
            .await?;
            let credentials_revoked = execute(
                &tx,
                "UPDATE api_token SET revoked_at = $2 WHERE principal = $1 AND revoked_at IS NULL",
                &[&id, &revoke.now],
            )
            .await?;
            self.notify(&tx, Change::Credentials).await?;
            let record = engine_by_id(&tx, id, false).await?.expect("updated above");
            tx.commit().await?;
            Ok(Ok(EngineRevoked { record, changed: true, credentials_revoked }))
        })
        .await
    }

    async fn transfer_engine(&self, principal_id: &str, new_owner: &str) -> Refusable<(String, EngineRecord)> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            let Some(before) = engine_by_id(&tx, principal_id, true).await? else {
                return Ok(Err(EngineRefusal::Unknown(principal_id.to_string())));
            };
            if before.is_revoked() {
                return Ok(Err(EngineRefusal::Revoked(principal_id.to_string())));
            }
            if let Err(refusal) = person(&tx, new_owner).await? {
                return Ok(Err(refusal));
            }
            execute(
                &tx,
                "UPDATE engine_principal SET owner = $2 WHERE principal_id = $1",
                &[&principal_id, &new_owner],
            )
            .await?;
            let after = engine_by_id(&tx, principal_id, false).await?.expect("updated above");
            tx.commit().await?;
            Ok(Ok((before.owner, after)))
        })
        .await
    }
}

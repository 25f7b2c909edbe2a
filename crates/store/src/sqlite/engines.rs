//! Engine principals in SQLite (see [`crate::EngineStore`]).

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use toolgate_domain::engines::{EngineRecord, EngineRefusal, NewEngine, PrincipalKind};

use super::SqliteStore;
use super::credentials::principal_by_name;
use crate::engines::{ENGINE_COLUMNS, EngineRevoked, EngineStore, Refusable, RevokeEngine};

fn engine_row(r: &rusqlite::Row) -> rusqlite::Result<EngineRecord> {
    Ok(EngineRecord {
        principal_id: r.get(0)?,
        display_name: r.get(1)?,
        owner: r.get(2)?,
        justification: r.get(3)?,
        classification: r.get(4)?,
        created_at: r.get(5)?,
        created_by: r.get(6)?,
        revoked_at: r.get(7)?,
        revoke_reason: r.get(8)?,
        superseded_by: r.get(9)?,
        requests_per_minute: r.get(10)?,
        concurrent_requests: r.get(11)?,
    })
}

fn engine_by_id(c: &Connection, id: &str) -> rusqlite::Result<Option<EngineRecord>> {
    c.query_row(
        &format!("SELECT {ENGINE_COLUMNS} FROM engine_principal WHERE principal_id = ?1"),
        params![id],
        engine_row,
    )
    .optional()
}

/// A person who may own an engine principal, or why `name` may not.
pub(super) fn person(c: &Connection, name: &str) -> rusqlite::Result<Result<(), EngineRefusal>> {
    Ok(match principal_by_name(c, name)? {
        None => Err(EngineRefusal::UnknownOwner(name.to_string())),
        Some(p) if p.kind == PrincipalKind::Engine => Err(EngineRefusal::OwnerIsEngine(name.to_string())),
        Some(_) => Ok(()),
    })
}

/// The live engine principals `owner` owns, by id (a person owning any may not be removed).
pub(super) fn owned_by(c: &Connection, owner: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt = c.prepare(
        "SELECT principal_id FROM engine_principal WHERE owner = ?1 AND revoked_at IS NULL ORDER BY principal_id",
    )?;
    stmt.query_map(params![owner], |r| r.get(0))?.collect()
}

#[async_trait]
impl EngineStore for SqliteStore {
    async fn create_engine(&self, new: NewEngine<'_>) -> Refusable<EngineRecord> {
        let record = EngineRecord {
            principal_id: new.principal_id.into(),
            display_name: new.display_name.into(),
            owner: new.owner.into(),
            justification: new.justification.into(),
            classification: new.classification.into(),
            created_at: new.now,
            created_by: new.created_by.into(),
            revoked_at: None,
            revoke_reason: None,
            superseded_by: None,
            requests_per_minute: new.requests_per_minute,
            concurrent_requests: new.concurrent_requests,
        };
        self.run(move |c| {
            let tx = c.transaction()?;
            if let Err(refusal) = person(&tx, &record.owner)? {
                return Ok(Err(refusal));
            }
            let taken = tx.execute(
                "INSERT INTO principal (name, roles, created_at, kind) VALUES (?1, '', ?2, 'engine') ON CONFLICT (name) DO NOTHING",
                params![record.principal_id, record.created_at],
            )? == 0;
            if taken {
                return Ok(Err(EngineRefusal::NameTaken(record.principal_id)));
            }
            tx.execute(
                &format!("INSERT INTO engine_principal ({ENGINE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL, NULL, NULL, ?8, ?9)"),
                params![
                    record.principal_id,
                    record.display_name,
                    record.owner,
                    record.justification,
                    record.classification,
                    record.created_at,
                    record.created_by,
                    record.requests_per_minute,
                    record.concurrent_requests
                ],
            )?;
            tx.commit()?;
            Ok(Ok(record))
        })
        .await
    }

    async fn engine(&self, principal_id: &str) -> crate::engines::Result<Option<EngineRecord>> {
        let id = principal_id.to_string();
        self.run(move |c| engine_by_id(c, &id)).await
    }

    async fn engines(&self, include_revoked: bool) -> crate::engines::Result<Vec<EngineRecord>> {
        self.run(move |c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {ENGINE_COLUMNS} FROM engine_principal WHERE ?1 OR revoked_at IS NULL ORDER BY principal_id"
            ))?;
            stmt.query_map(params![include_revoked], engine_row)?.collect()
        })
        .await
    }

    async fn revoke_engine(&self, revoke: RevokeEngine<'_>) -> Refusable<EngineRevoked> {
        let (id, reason, superseded_by, now) = (
            revoke.principal_id.to_string(),
            revoke.reason.map(str::to_string),
            revoke.superseded_by.map(str::to_string),
            revoke.now,
        );
        self.run(move |c| {
            let tx = c.transaction()?;
            let Some(before) = engine_by_id(&tx, &id)? else { return Ok(Err(EngineRefusal::Unknown(id))) };
            if let Some(successor) = superseded_by.as_deref()
                && (successor == id || engine_by_id(&tx, successor)?.is_none())
            {
                return Ok(Err(EngineRefusal::Unknown(successor.to_string())));
            }
            if before.is_revoked() {
                return Ok(Ok(EngineRevoked { record: before, changed: false, credentials_revoked: 0 }));
            }
            tx.execute(
                "UPDATE engine_principal SET revoked_at = ?2, revoke_reason = ?3, superseded_by = ?4 WHERE principal_id = ?1",
                params![id, now, reason, superseded_by],
            )?;
            let credentials_revoked = tx.execute(
                "UPDATE api_token SET revoked_at = ?2 WHERE principal = ?1 AND revoked_at IS NULL",
                params![id, now],
            )? as u64;
            let record = engine_by_id(&tx, &id)?.expect("updated above");
            tx.commit()?;
            Ok(Ok(EngineRevoked { record, changed: true, credentials_revoked }))
        })
        .await
    }

    async fn transfer_engine(&self, principal_id: &str, new_owner: &str) -> Refusable<(String, EngineRecord)> {
        let (id, new_owner) = (principal_id.to_string(), new_owner.to_string());
        self.run(move |c| {
            let tx = c.transaction()?;
            let Some(before) = engine_by_id(&tx, &id)? else { return Ok(Err(EngineRefusal::Unknown(id))) };
            if before.is_revoked() {
                return Ok(Err(EngineRefusal::Revoked(id)));
            }
            if let Err(refusal) = person(&tx, &new_owner)? {
                return Ok(Err(refusal));
            }
            tx.execute("UPDATE engine_principal SET owner = ?2 WHERE principal_id = ?1", params![id, new_owner])?;
            let after = engine_by_id(&tx, &id)?.expect("updated above");
            tx.commit()?;
            Ok(Ok((before.owner, after)))
        })
        .await
    }
}

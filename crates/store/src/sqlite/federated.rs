//! People's links to their identity provider in SQLite (see [`crate::FederatedStore`]).

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::SqliteStore;
use super::credentials::principal_by_name;
use crate::federated::{
    FEDERATED_COLUMNS, FederatedIdentity, FederatedStore, LinkRefusal, NewFederated, Result, Seen, Tombstone,
    candidate_names, grants_from, grants_text, link_refusal,
};

fn identity_row(r: &rusqlite::Row) -> rusqlite::Result<FederatedIdentity> {
    Ok(FederatedIdentity {
        issuer: r.get(0)?,
        subject: r.get(1)?,
        principal: r.get(2)?,
        display_name: r.get(3)?,
        email: r.get(4)?,
        created_at: r.get(5)?,
        last_seen_at: r.get(6)?,
        idp_grants: grants_from(&r.get::<_, String>(7)?),
    })
}

fn by_pair(c: &Connection, issuer: &str, subject: &str) -> rusqlite::Result<Option<FederatedIdentity>> {
    c.query_row(
        &format!("SELECT {FEDERATED_COLUMNS} FROM federated_identity WHERE issuer = ?1 AND subject = ?2"),
        params![issuer, subject],
        identity_row,
    )
    .optional()
}

fn of_principal(c: &Connection, principal: &str) -> rusqlite::Result<Option<FederatedIdentity>> {
    c.query_row(
        &format!("SELECT {FEDERATED_COLUMNS} FROM federated_identity WHERE principal = ?1"),
        params![principal],
        identity_row,
    )
    .optional()
}

fn insert_link(c: &Connection, identity: &FederatedIdentity) -> rusqlite::Result<()> {
    c.execute(
        &format!("INSERT INTO federated_identity ({FEDERATED_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"),
        params![
            identity.issuer,
            identity.subject,
            identity.principal,
            identity.display_name,
            identity.email,
            identity.created_at,
            identity.last_seen_at,
            grants_text(&identity.idp_grants)
        ],
    )?;
    Ok(())
}

/// Every link, by principal (a review's snapshot reads them in its transaction).
pub(super) fn all_identities(c: &Connection) -> rusqlite::Result<Vec<FederatedIdentity>> {
    let mut stmt = c.prepare(&format!("SELECT {FEDERATED_COLUMNS} FROM federated_identity ORDER BY principal"))?;
    stmt.query_map([], identity_row)?.collect()
}

#[async_trait]
impl FederatedStore for SqliteStore {
    async fn federated(&self, issuer: &str, subject: &str) -> Result<Option<FederatedIdentity>> {
        let (issuer, subject) = (issuer.to_string(), subject.to_string());
        self.run(move |c| by_pair(c, &issuer, &subject)).await
    }

    async fn provision_federated(&self, new: NewFederated<'_>) -> Result<FederatedIdentity> {
        let mut identity = FederatedIdentity {
            issuer: new.issuer.into(),
            subject: new.subject.into(),
            principal: String::new(),
            display_name: new.display_name.map(str::to_string),
            email: new.email.map(str::to_string),
            created_at: new.now,
            last_seen_at: Some(new.now),
            idp_grants: new.idp_grants.to_vec(),
        };
        let hint = new.name_hint.to_string();
        self.run(move |c| {
            let tx = c.transaction()?;
            if let Some(existing) = by_pair(&tx, &identity.issuer, &identity.subject)? {
                return Ok(existing);
            }
            for name in candidate_names(&hint) {
                let inserted = tx.execute(
                    // Taken also by a name that differs only in case: `Admin` is never made beside `admin`.
                    "INSERT INTO principal (name, roles, created_at, kind) SELECT ?1, '', ?2, 'person' \
                     WHERE NOT EXISTS (SELECT 1 FROM principal WHERE lower(name) = lower(?1)) ON CONFLICT (name) DO NOTHING",
                    params![name, identity.created_at],
                )? == 1;
                if inserted {
                    identity.principal = name;
                    break;
                }
            }
            insert_link(&tx, &identity)?;
            tx.commit()?;
            Ok(identity)
        })
        .await
    }

    async fn link_federated(
        &self,
        principal: &str,
        issuer: &str,
        subject: &str,
        now: i64,
    ) -> Result<std::result::Result<FederatedIdentity, LinkRefusal>> {
        let identity = FederatedIdentity {
            issuer: issuer.into(),
            subject: subject.into(),
            principal: principal.into(),
            display_name: None,
            email: None,
            created_at: now,
            last_seen_at: None,
            idp_grants: Vec::new(),
        };
        self.run(move |c| {
            let tx = c.transaction()?;
            let refusal = link_refusal(
                &identity.principal,
                principal_by_name(&tx, &identity.principal)?,
                of_principal(&tx, &identity.principal)?,
                by_pair(&tx, &identity.issuer, &identity.subject)?,
            );
            if let Some(refusal) = refusal {
                return Ok(Err(refusal));
            }
            // An administrator linking a subject re-admits it.
            tx.execute(
                "DELETE FROM federated_tombstone WHERE issuer = ?1 AND subject = ?2",
                params![identity.issuer, identity.subject],
            )?;
            insert_link(&tx, &identity)?;
            tx.commit()?;
            Ok(Ok(identity))
        })
        .await
    }

    async fn seen_federated(&self, seen: Seen<'_>) -> Result<()> {
        let (issuer, subject) = (seen.issuer.to_string(), seen.subject.to_string());
        let (display_name, email) = (seen.display_name.map(str::to_string), seen.email.map(str::to_string));
        let (grants, now) = (grants_text(seen.idp_grants), seen.now);
        self.run(move |c| {
            c.execute(
                "UPDATE federated_identity SET last_seen_at = ?3, display_name = coalesce(?4, display_name),
                     email = coalesce(?5, email), idp_grants = ?6 WHERE issuer = ?1 AND subject = ?2",
                params![issuer, subject, now, display_name, email, grants],
            )?;
            Ok(())
        })
        .await
    }

    async fn federated_identities(&self, principal: Option<&str>) -> Result<Vec<FederatedIdentity>> {
        let principal = principal.map(str::to_string);
        self.run(move |c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {FEDERATED_COLUMNS} FROM federated_identity WHERE ?1 IS NULL OR principal = ?1 ORDER BY principal"
            ))?;
            stmt.query_map(params![principal], identity_row)?.collect()
        })
        .await
    }

    async fn tombstone(&self, issuer: &str, subject: &str) -> Result<Option<Tombstone>> {
        let (issuer, subject) = (issuer.to_string(), subject.to_string());
        self.run(move |c| {
            c.query_row(
                "SELECT issuer, subject, principal, removed_at FROM federated_tombstone WHERE issuer = ?1 AND subject = ?2",
                params![issuer, subject],
                |r| Ok(Tombstone { issuer: r.get(0)?, subject: r.get(1)?, principal: r.get(2)?, removed_at: r.get(3)? }),
            )
            .optional()
        })
        .await
    }

    async fn readmit(&self, issuer: &str, subject: &str) -> Result<bool> {
        let (issuer, subject) = (issuer.to_string(), subject.to_string());
        self.run(move |c| {
            let sql = "DELETE FROM federated_tombstone WHERE issuer = ?1 AND subject = ?2";
            Ok(c.execute(sql, params![issuer, subject])? == 1)
        })
        .await
    }
}

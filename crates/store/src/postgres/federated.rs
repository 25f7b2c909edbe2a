//! People's links to their identity provider on PostgreSQL (see [`crate::FederatedStore`] and
//! the SQLite twin).

use async_trait::async_trait;
use deadpool_postgres::GenericClient;

use super::credentials::principal_by_name;
use super::{Pg, PostgresStore, execute, pg, row, rows};
use crate::federated::{
    FEDERATED_COLUMNS, FederatedIdentity, FederatedStore, LinkRefusal, NewFederated, Result, Seen, Tombstone,
    candidate_names, grants_from, grants_text, link_refusal,
};

fn identity_row(r: &tokio_postgres::Row) -> Pg<FederatedIdentity> {
    Ok(FederatedIdentity {
        issuer: r.try_get(0)?,
        subject: r.try_get(1)?,
        principal: r.try_get(2)?,
        display_name: r.try_get(3)?,
        email: r.try_get(4)?,
        created_at: r.try_get(5)?,
        last_seen_at: r.try_get(6)?,
        idp_grants: grants_from(&r.try_get::<_, String>(7)?),
    })
}

async fn by_pair(c: &impl GenericClient, issuer: &str, subject: &str) -> Pg<Option<FederatedIdentity>> {
    let sql = format!("SELECT {FEDERATED_COLUMNS} FROM federated_identity WHERE issuer = $1 AND subject = $2");
    row(c, &sql, &[&issuer, &subject]).await?.as_ref().map(identity_row).transpose()
}

async fn of_principal(c: &impl GenericClient, principal: &str) -> Pg<Option<FederatedIdentity>> {
    let sql = format!("SELECT {FEDERATED_COLUMNS} FROM federated_identity WHERE principal = $1");
    row(c, &sql, &[&principal]).await?.as_ref().map(identity_row).transpose()
}

async fn insert_link(c: &impl GenericClient, i: &FederatedIdentity) -> Pg<()> {
    let sql = format!("INSERT INTO federated_identity ({FEDERATED_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)");
    let grants = grants_text(&i.idp_grants);
    let values: [&(dyn tokio_postgres::types::ToSql + Sync); 8] =
        [&i.issuer, &i.subject, &i.principal, &i.display_name, &i.email, &i.created_at, &i.last_seen_at, &grants];
    execute(c, &sql, &values).await?;
    Ok(())
}

/// Every link, by principal (a review's snapshot reads them in its transaction).
pub(super) async fn all_identities(c: &impl GenericClient) -> Pg<Vec<FederatedIdentity>> {
    let sql = format!("SELECT {FEDERATED_COLUMNS} FROM federated_identity ORDER BY principal");
    rows(c, &sql, &[]).await?.iter().map(identity_row).collect()
}

#[async_trait]
impl FederatedStore for PostgresStore {
    async fn federated(&self, issuer: &str, subject: &str) -> Result<Option<FederatedIdentity>> {
        pg(async { by_pair(&*self.conn().await?, issuer, subject).await }).await
    }

    async fn provision_federated(&self, new: NewFederated<'_>) -> Result<FederatedIdentity> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            // Two replicas signing the same person in for the first time at once: one waits.
            execute(&tx, "SELECT pg_advisory_xact_lock(hashtext($1 || ' ' || $2))", &[&new.issuer, &new.subject])
                .await?;
            if let Some(existing) = by_pair(&tx, new.issuer, new.subject).await? {
                return Ok(existing);
            }
            let mut principal = String::new();
            for name in candidate_names(new.name_hint) {
                let inserted = execute(
                    &tx,
                    // Taken also by a name that differs only in case: `Admin` is never made beside `admin`.
                    "INSERT INTO principal (name, roles, created_at, kind) SELECT $1::text, '', $2::bigint, 'person' \
                     WHERE NOT EXISTS (SELECT 1 FROM principal WHERE lower(name) = lower($1)) ON CONFLICT (name) DO NOTHING",
                    &[&name, &new.now],
                )
                .await?;
                if inserted == 1 {
                    principal = name;
                    break;
                }
            }
            let identity = FederatedIdentity {
                issuer: new.issuer.into(),
                subject: new.subject.into(),
                principal,
                display_name: new.display_name.map(str::to_string),
                email: new.email.map(str::to_string),
                created_at: new.now,
                last_seen_at: Some(new.now),
                idp_grants: new.idp_grants.to_vec(),
            };
            insert_link(&tx, &identity).await?;
            tx.commit().await?;
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
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            let refusal = link_refusal(
                principal,
                principal_by_name(&tx, principal).await?,
                of_principal(&tx, principal).await?,
                by_pair(&tx, issuer, subject).await?,
            );
            if let Some(refusal) = refusal {
                return Ok(Err(refusal));
            }
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
            // An administrator linking a subject re-admits it.
            execute(&tx, "DELETE FROM federated_tombstone WHERE issuer = $1 AND subject = $2", &[&issuer, &subject])
                .await?;
            insert_link(&tx, &identity).await?;
            tx.commit().await?;
            Ok(Ok(identity))
        })
        .await
    }

    async fn seen_federated(&self, seen: Seen<'_>) -> Result<()> {
        pg(async {
            let grants = grants_text(seen.idp_grants);
            execute(
                &*self.conn().await?,
                "UPDATE federated_identity SET last_seen_at = $3, display_name = coalesce($4, display_name),
                     email = coalesce($5, email), idp_grants = $6 WHERE issuer = $1 AND subject = $2",
                &[&seen.issuer, &seen.subject, &seen.now, &seen.display_name, &seen.email, &grants],
            )
            .await?;
            Ok(())
        })
        .await
    }

    async fn federated_identities(&self, principal: Option<&str>) -> Result<Vec<FederatedIdentity>> {
        pg(async {
            let sql = format!(
                "SELECT {FEDERATED_COLUMNS} FROM federated_identity WHERE $1::TEXT IS NULL OR principal = $1 ORDER BY principal"
            );
            rows(&*self.conn().await?, &sql, &[&principal]).await?.iter().map(identity_row).collect()
        })
        .await
    }

    async fn tombstone(&self, issuer: &str, subject: &str) -> Result<Option<Tombstone>> {
        pg(async {
            let sql = "SELECT issuer, subject, principal, removed_at FROM federated_tombstone WHERE issuer = $1 AND subject = $2";
            let found = row(&*self.conn().await?, sql, &[&issuer, &subject]).await?;
            let tombstone = |r: tokio_postgres::Row| -> Pg<Tombstone> {
                Ok(Tombstone { issuer: r.try_get(0)?, subject: r.try_get(1)?, principal: r.try_get(2)?, removed_at: r.try_get(3)? })
            };
            found.map(tombstone).transpose()
        })
        .await
    }

    async fn readmit(&self, issuer: &str, subject: &str) -> Result<bool> {
        pg(async {
            let sql = "DELETE FROM federated_tombstone WHERE issuer = $1 AND subject = $2";
            Ok(execute(&*self.conn().await?, sql, &[&issuer, &subject]).await? == 1)
        })
        .await
    }
}

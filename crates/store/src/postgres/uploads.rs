//! Upload grants and their content on PostgreSQL (see [`crate::UploadStore`] and the SQLite
//! twin). Claims are conditional updates, so two replicas never both take one grant.

use async_trait::async_trait;
use tokio_postgres::types::ToSql;
use toolgate_domain::groups::Reach;
use toolgate_domain::uploads::{CLAIM_LEASE_MS, GrantState, NewGrant, UploadGrant, UploadKind, UploadRefusal};

use super::confinement::{reach_agents, reach_param};
use super::{Pg, PostgresStore, execute, pg, row, rows};
use crate::uploads::{
    Claim, Finished, GRANT_COLUMNS, GRANT_FROM, Result, StoredContent, Swept, UploadStore, claim_refusal,
};

fn grant_row(r: &tokio_postgres::Row) -> Pg<UploadGrant> {
    let state: String = r.try_get(10)?;
    let kind: Option<String> = r.try_get(15)?;
    Ok(UploadGrant {
        minted: NewGrant {
            grant_id: r.try_get(0)?,
            agent_id: r.try_get(1)?,
            source_path: r.try_get(2)?,
            expected_sha256: r.try_get(3)?,
            retention_class: r.try_get(4)?,
            retention_secs: r.try_get(5)?,
            max_bytes: r.try_get(6)?,
            created_at_ms: r.try_get(7)?,
            expires_at_ms: r.try_get(8)?,
            created_by: r.try_get(9)?,
        },
        state: GrantState::parse(&state).unwrap_or(GrantState::Failed),
        attempt: r.try_get(11)?,
        claimed_at_ms: r.try_get(12)?,
        finished_at_ms: r.try_get(13)?,
        uploaded_path: r.try_get(14)?,
        kind: kind.as_deref().and_then(UploadKind::parse),
        sha256: r.try_get(16)?,
        size_bytes: r.try_get(17)?,
        failure: r.try_get(18)?,
        revoked_at_ms: r.try_get(19)?,
        revoked_by: r.try_get(20)?,
        preview: r.try_get(21)?,
        content_kept: r.try_get(22)?,
    })
}

/// ` AND` the grant's agent is within the reach bound at `$n` (nothing for the whole fleet).
fn confined(groups: &Option<Vec<String>>, n: usize) -> String {
    match groups {
        Some(_) => format!(" AND g.agent_id IN ({})", reach_agents(n)),
        None => String::new(),
    }
}

async fn read_grant(
    c: &impl deadpool_postgres::GenericClient,
    grant_id: &str,
    reach: &Reach,
) -> Pg<Option<UploadGrant>> {
    let groups = reach_param(reach);
    let sql = format!("SELECT {GRANT_COLUMNS} FROM {GRANT_FROM} WHERE g.grant_id = $1{}", confined(&groups, 2));
    let mut values: Vec<&(dyn ToSql + Sync)> = vec![&grant_id];
    if let Some(groups) = &groups {
        values.push(groups);
    }
    row(c, &sql, &values).await?.as_ref().map(grant_row).transpose()
}

/// Whether `$2` (the attempt) still holds grant `$1`: uploading, renewed after `$3`.
const HOLDS: &str = "grant_id = $1 AND attempt = $2 AND state = 'uploading' AND claimed_at_ms > $3";

#[async_trait]
impl UploadStore for PostgresStore {
    async fn mint_grant(&self, g: &NewGrant) -> Result<()> {
        pg(async {
            execute(
                &*self.conn().await?,
                "INSERT INTO upload_grant (grant_id, agent_id, source_path, expected_sha256, retention_class,
                     retention_secs, max_bytes, created_at_ms, expires_at_ms, created_by, state)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'open')",
                &[
                    &g.grant_id,
                    &g.agent_id,
                    &g.source_path,
                    &g.expected_sha256,
                    &g.retention_class,
                    &g.retention_secs,
                    &g.max_bytes,
                    &g.created_at_ms,
                    &g.expires_at_ms,
                    &g.created_by,
                ],
            )
            .await
            .map(drop)
        })
        .await
    }

    async fn grant(&self, grant_id: &str, reach: &Reach) -> Result<Option<UploadGrant>> {
        pg(async { read_grant(&*self.conn().await?, grant_id, reach).await }).await
    }

    async fn grants(&self, reach: &Reach, agent_id: Option<&str>, limit: usize) -> Result<Vec<UploadGrant>> {
        pg(async {
            let groups = reach_param(reach);
            let sql = format!(
                "SELECT {GRANT_COLUMNS} FROM {GRANT_FROM} WHERE ($1::text IS NULL OR g.agent_id = $1){}
                 ORDER BY g.created_at_ms DESC, g.grant_id LIMIT $2",
                confined(&groups, 3)
            );
            let limit = limit as i64;
            let mut values: Vec<&(dyn ToSql + Sync)> = vec![&agent_id, &limit];
            if let Some(groups) = &groups {
                values.push(groups);
            }
            rows(&*self.conn().await?, &sql, &values).await?.iter().map(grant_row).collect()
        })
        .await
    }

    async fn revoke_grant(
        &self,
        grant_id: &str,
        reach: &Reach,
        by: &str,
        now_ms: i64,
    ) -> Result<Option<(UploadGrant, bool)>> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            let Some(before) = read_grant(&tx, grant_id, reach).await? else { return Ok(None) };
            let changed = execute(
                &tx,
                "UPDATE upload_grant SET state = 'revoked', revoked_at_ms = $2, revoked_by = $3
                 WHERE grant_id = $1 AND state != 'revoked'",
                &[&grant_id, &now_ms, &by],
            )
            .await?
                == 1;
            let after = read_grant(&tx, grant_id, reach).await?.unwrap_or(before);
            tx.commit().await?;
            Ok(Some((after, changed)))
        })
        .await
    }

    async fn claim_grant(&self, claim: &Claim<'_>) -> Result<std::result::Result<(), UploadRefusal>> {
        let found = pg(async {
            let c = self.conn().await?;
            let lapsed = claim.now_ms - CLAIM_LEASE_MS;
            let taken = execute(
                &*c,
                "UPDATE upload_grant SET state = 'uploading', attempt = $3, claimed_at_ms = $5, uploaded_path = $4
                 WHERE grant_id = $1 AND agent_id = $2 AND expires_at_ms > $5
                   AND (state = 'open' OR (state = 'uploading' AND claimed_at_ms <= $6))",
                &[&claim.grant_id, &claim.agent_id, &claim.attempt, &claim.path, &claim.now_ms, &lapsed],
            )
            .await?
                == 1;
            if taken { Ok(None) } else { read_grant(&*c, claim.grant_id, &Reach::Fleet).await.map(Some) }
        })
        .await?;
        Ok(match found {
            None => Ok(()),
            Some(grant) => Err(claim_refusal(grant, claim)),
        })
    }

    async fn put_chunk(&self, grant_id: &str, attempt: &str, seq: i64, bytes: &[u8], now_ms: i64) -> Result<bool> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            let sql = format!("UPDATE upload_grant SET claimed_at_ms = $4 WHERE {HOLDS}");
            let lapsed = now_ms - CLAIM_LEASE_MS;
            if execute(&tx, &sql, &[&grant_id, &attempt, &lapsed, &now_ms]).await? != 1 {
                return Ok(false);
            }
            execute(
                &tx,
                "INSERT INTO upload_chunk (attempt, seq, bytes) VALUES ($1, $2, $3)",
                &[&attempt, &seq, &bytes],
            )
            .await?;
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    async fn finish_upload(&self, done: &Finished<'_>) -> Result<std::result::Result<UploadGrant, UploadRefusal>> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            let sql = format!(
                "UPDATE upload_grant SET state = 'stored', finished_at_ms = $4, kind = $5, sha256 = $6, size_bytes = $7,
                     preview = $8 WHERE {HOLDS}"
            );
            let (lapsed, kind) = (done.now_ms - CLAIM_LEASE_MS, done.kind.as_str());
            let values: [&(dyn ToSql + Sync); 8] =
                [&done.grant_id, &done.attempt, &lapsed, &done.now_ms, &kind, &done.sha256, &done.size_bytes, &done.preview];
            if execute(&tx, &sql, &values).await? != 1 {
                let grant = read_grant(&tx, done.grant_id, &Reach::Fleet).await?;
                return Ok(Err(UploadRefusal::lost(grant.as_ref(), done.grant_id)));
            }
            let first_copy = execute(
                &tx,
                "INSERT INTO upload_content (sha256, size_bytes, attempt, chunks, stored_at_ms) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (sha256) DO NOTHING",
                &[&done.sha256, &done.size_bytes, &done.attempt, &done.chunks, &done.now_ms],
            )
            .await?
                == 1;
            if !first_copy {
                execute(&tx, "DELETE FROM upload_chunk WHERE attempt = $1", &[&done.attempt]).await?;
            }
            let grant = read_grant(&tx, done.grant_id, &Reach::Fleet).await?;
            tx.commit().await?;
            Ok(grant.ok_or_else(|| UploadRefusal::Unknown(done.grant_id.to_string())))
        })
        .await
    }

    async fn abandon_upload(&self, grant_id: &str, attempt: &str, reason: Option<&str>, now_ms: i64) -> Result<()> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            match reason {
                Some(reason) => {
                    execute(
                        &tx,
                        "UPDATE upload_grant SET state = 'failed', failure = $3, finished_at_ms = $4
                         WHERE grant_id = $1 AND attempt = $2 AND state = 'uploading'",
                        &[&grant_id, &attempt, &reason, &now_ms],
                    )
                    .await?
                }
                None => execute(
                    &tx,
                    "UPDATE upload_grant SET state = 'open', attempt = NULL, claimed_at_ms = NULL, uploaded_path = NULL
                         WHERE grant_id = $1 AND attempt = $2 AND state = 'uploading'",
                    &[&grant_id, &attempt],
                )
                .await?,
            };
            execute(
                &tx,
                "DELETE FROM upload_chunk WHERE attempt = $1
                   AND NOT EXISTS (SELECT 1 FROM upload_content f WHERE f.attempt = $1)",
                &[&attempt],
            )
            .await?;
            Ok(tx.commit().await?)
        })
        .await
    }

    async fn content(&self, sha256: &str) -> Result<Option<StoredContent>> {
        pg(async {
            let found = row(
                &*self.conn().await?,
                "SELECT sha256, size_bytes, attempt, chunks FROM upload_content WHERE sha256 = $1",
                &[&sha256],
            )
            .await?;
            found
                .map(|r| {
                    Ok(StoredContent {
                        sha256: r.try_get(0)?,
                        size_bytes: r.try_get(1)?,
                        attempt: r.try_get(2)?,
                        chunks: r.try_get(3)?,
                    })
                })
                .transpose()
        })
        .await
    }

    async fn content_chunk(&self, content: &StoredContent, seq: i64) -> Result<Option<Vec<u8>>> {
        pg(async {
            let sql = "SELECT bytes FROM upload_chunk WHERE attempt = $1 AND seq = $2";
            let found = row(&*self.conn().await?, sql, &[&content.attempt, &seq]).await?;
            Ok(found.map(|r| r.try_get(0)).transpose()?)
        })
        .await
    }

    async fn sweep_uploads(&self, now_ms: i64) -> Result<Swept> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            let deleted = rows(
                &tx,
                "DELETE FROM upload_content f WHERE NOT EXISTS (SELECT 1 FROM upload_grant g WHERE g.sha256 = f.sha256
                   AND g.state = 'stored' AND g.finished_at_ms + g.retention_secs * 1000 > $1)
                 RETURNING sha256, size_bytes",
                &[&now_ms],
            )
            .await?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Pg<Vec<_>>>()?;
            let lapsed = now_ms - CLAIM_LEASE_MS;
            let orphan_chunks = execute(
                &tx,
                "DELETE FROM upload_chunk WHERE attempt NOT IN (SELECT attempt FROM upload_content)
                   AND attempt NOT IN (SELECT attempt FROM upload_grant
                     WHERE state = 'uploading' AND attempt IS NOT NULL AND claimed_at_ms > $1)",
                &[&lapsed],
            )
            .await?;
            tx.commit().await?;
            Ok(Swept { deleted, orphan_chunks })
        })
        .await
    }
}

//! Upload grants and their content in SQLite (see [`crate::UploadStore`]).

use async_trait::async_trait;
use rusqlite::types::Value as Sql;
use rusqlite::{OptionalExtension, params};
use toolgate_domain::groups::Reach;
use toolgate_domain::uploads::{CLAIM_LEASE_MS, GrantState, NewGrant, UploadGrant, UploadKind, UploadRefusal};

use super::SqliteStore;
use super::confinement::{reach_agents, reach_param};
use crate::uploads::{
    Claim, Finished, GRANT_COLUMNS, GRANT_FROM, Result, StoredContent, Swept, UploadStore, claim_refusal,
};

fn grant_row(r: &rusqlite::Row) -> rusqlite::Result<UploadGrant> {
    let state: String = r.get(10)?;
    let kind: Option<String> = r.get(15)?;
    Ok(UploadGrant {
        minted: NewGrant {
            grant_id: r.get(0)?,
            agent_id: r.get(1)?,
            source_path: r.get(2)?,
            expected_sha256: r.get(3)?,
            retention_class: r.get(4)?,
            retention_secs: r.get(5)?,
            max_bytes: r.get(6)?,
            created_at_ms: r.get(7)?,
            expires_at_ms: r.get(8)?,
            created_by: r.get(9)?,
        },
        state: GrantState::parse(&state).unwrap_or(GrantState::Failed),
        attempt: r.get(11)?,
        claimed_at_ms: r.get(12)?,
        finished_at_ms: r.get(13)?,
        uploaded_path: r.get(14)?,
        kind: kind.as_deref().and_then(UploadKind::parse),
        sha256: r.get(16)?,
        size_bytes: r.get(17)?,
        failure: r.get(18)?,
        revoked_at_ms: r.get(19)?,
        revoked_by: r.get(20)?,
        preview: r.get(21)?,
        content_kept: r.get(22)?,
    })
}

/// ` AND` the grant's agent is within the reach whose JSON parameter is `?n`; the value to
/// bind there (nothing for the whole fleet).
fn confined(reach: &Reach, n: usize) -> (String, Option<String>) {
    match reach_param(reach) {
        Some(groups) => (format!(" AND g.agent_id IN ({})", reach_agents(&format!("?{n}"))), Some(groups)),
        None => (String::new(), None),
    }
}

fn read_grant(c: &rusqlite::Connection, grant_id: &str, reach: &Reach) -> rusqlite::Result<Option<UploadGrant>> {
    let (condition, groups) = confined(reach, 2);
    let sql = format!("SELECT {GRANT_COLUMNS} FROM {GRANT_FROM} WHERE g.grant_id = ?1{condition}");
    let mut values = vec![Sql::from(grant_id.to_string())];
    values.extend(groups.map(Sql::from));
    c.query_row(&sql, rusqlite::params_from_iter(values), grant_row).optional()
}

/// Whether `attempt` still holds the grant: uploading, and renewed within the lease.
const HOLDS: &str = "grant_id = ?1 AND attempt = ?2 AND state = 'uploading' AND claimed_at_ms > ?3";

#[async_trait]
impl UploadStore for SqliteStore {
    async fn mint_grant(&self, g: &NewGrant) -> Result<()> {
        let g = g.clone();
        self.run(move |c| {
            c.execute(
                "INSERT INTO upload_grant (grant_id, agent_id, source_path, expected_sha256, retention_class,
                     retention_secs, max_bytes, created_at_ms, expires_at_ms, created_by, state)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'open')",
                params![
                    g.grant_id,
                    g.agent_id,
                    g.source_path,
                    g.expected_sha256,
                    g.retention_class,
                    g.retention_secs,
                    g.max_bytes,
                    g.created_at_ms,
                    g.expires_at_ms,
                    g.created_by
                ],
            )
            .map(drop)
        })
        .await
    }

    async fn grant(&self, grant_id: &str, reach: &Reach) -> Result<Option<UploadGrant>> {
        let (grant_id, reach) = (grant_id.to_string(), reach.clone());
        self.run(move |c| read_grant(c, &grant_id, &reach)).await
    }

    async fn grants(&self, reach: &Reach, agent_id: Option<&str>, limit: usize) -> Result<Vec<UploadGrant>> {
        let (reach, agent_id) = (reach.clone(), agent_id.map(str::to_string));
        self.run(move |c| {
            let (condition, groups) = confined(&reach, 3);
            let sql = format!(
                "SELECT {GRANT_COLUMNS} FROM {GRANT_FROM} WHERE (?1 IS NULL OR g.agent_id = ?1){condition}
                 ORDER BY g.created_at_ms DESC, g.grant_id LIMIT ?2"
            );
            let mut values = vec![Sql::from(agent_id), Sql::from(limit as i64)];
            values.extend(groups.map(Sql::from));
            let mut stmt = c.prepare_cached(&sql)?;
            stmt.query_map(rusqlite::params_from_iter(values), grant_row)?.collect()
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
        let (grant_id, reach, by) = (grant_id.to_string(), reach.clone(), by.to_string());
        self.run(move |c| {
            let tx = c.transaction()?;
            let Some(before) = read_grant(&tx, &grant_id, &reach)? else { return Ok(None) };
            let changed = tx.execute(
                "UPDATE upload_grant SET state = 'revoked', revoked_at_ms = ?2, revoked_by = ?3
                 WHERE grant_id = ?1 AND state != 'revoked'",
                params![grant_id, now_ms, by],
            )? == 1;
            let after = read_grant(&tx, &grant_id, &reach)?.unwrap_or(before);
            tx.commit()?;
            Ok(Some((after, changed)))
        })
        .await
    }

    async fn claim_grant(&self, claim: &Claim<'_>) -> Result<std::result::Result<(), UploadRefusal>> {
        let (grant_id, agent_id, path, attempt, now) = (
            claim.grant_id.to_string(),
            claim.agent_id.to_string(),
            claim.path.to_string(),
            claim.attempt.to_string(),
            claim.now_ms,
        );
        let found = self
            .run(move |c| {
                let taken = c.execute(
                    "UPDATE upload_grant SET state = 'uploading', attempt = ?3, claimed_at_ms = ?5, uploaded_path = ?4
                     WHERE grant_id = ?1 AND agent_id = ?2 AND expires_at_ms > ?5
                       AND (state = 'open' OR (state = 'uploading' AND claimed_at_ms <= ?6))",
                    params![grant_id, agent_id, attempt, path, now, now - CLAIM_LEASE_MS],
                )? == 1;
                if taken { Ok(None) } else { read_grant(c, &grant_id, &Reach::Fleet).map(Some) }
            })
            .await?;
        Ok(match found {
            None => Ok(()),
            Some(grant) => Err(claim_refusal(grant, claim)),
        })
    }

    async fn put_chunk(&self, grant_id: &str, attempt: &str, seq: i64, bytes: &[u8], now_ms: i64) -> Result<bool> {
        let (grant_id, attempt, bytes) = (grant_id.to_string(), attempt.to_string(), bytes.to_vec());
        self.run(move |c| {
            let tx = c.transaction()?;
            let sql = format!("UPDATE upload_grant SET claimed_at_ms = ?4 WHERE {HOLDS}");
            if tx.execute(&sql, params![grant_id, attempt, now_ms - CLAIM_LEASE_MS, now_ms])? != 1 {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO upload_chunk (attempt, seq, bytes) VALUES (?1, ?2, ?3)",
                params![attempt, seq, bytes],
            )?;
            tx.commit()?;
            Ok(true)
        })
        .await
    }

    async fn finish_upload(&self, done: &Finished<'_>) -> Result<std::result::Result<UploadGrant, UploadRefusal>> {
        let (grant_id, attempt, sha256, preview) =
            (done.grant_id.to_string(), done.attempt.to_string(), done.sha256.to_string(), done.preview.to_string());
        let (kind, size, chunks, now) = (done.kind.as_str(), done.size_bytes, done.chunks, done.now_ms);
        self.run(move |c| {
            let tx = c.transaction()?;
            let sql = format!(
                "UPDATE upload_grant SET state = 'stored', finished_at_ms = ?4, kind = ?5, sha256 = ?6, size_bytes = ?7,
                     preview = ?8 WHERE {HOLDS}"
            );
            let values = params![grant_id, attempt, now - CLAIM_LEASE_MS, now, kind, sha256, size, preview];
            if tx.execute(&sql, values)? != 1 {
                let grant = read_grant(&tx, &grant_id, &Reach::Fleet)?;
                return Ok(Err(UploadRefusal::lost(grant.as_ref(), &grant_id)));
            }
            let first_copy = tx.execute(
                "INSERT INTO upload_content (sha256, size_bytes, attempt, chunks, stored_at_ms) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (sha256) DO NOTHING",
                params![sha256, size, attempt, chunks, now],
            )? == 1;
            if !first_copy {
                tx.execute("DELETE FROM upload_chunk WHERE attempt = ?1", params![attempt])?;
            }
            let grant = read_grant(&tx, &grant_id, &Reach::Fleet)?;
            tx.commit()?;
            Ok(grant.ok_or(UploadRefusal::Unknown(grant_id)))
        })
        .await
    }

    async fn abandon_upload(&self, grant_id: &str, attempt: &str, reason: Option<&str>, now_ms: i64) -> Result<()> {
        let (grant_id, attempt, reason) = (grant_id.to_string(), attempt.to_string(), reason.map(str::to_string));
        self.run(move |c| {
            let tx = c.transaction()?;
            match &reason {
                Some(reason) => tx.execute(
                    "UPDATE upload_grant SET state = 'failed', failure = ?3, finished_at_ms = ?4
                     WHERE grant_id = ?1 AND attempt = ?2 AND state = 'uploading'",
                    params![grant_id, attempt, reason, now_ms],
                )?,
                None => tx.execute(
                    "UPDATE upload_grant SET state = 'open', attempt = NULL, claimed_at_ms = NULL, uploaded_path = NULL
                     WHERE grant_id = ?1 AND attempt = ?2 AND state = 'uploading'",
                    params![grant_id, attempt],
                )?,
            };
            tx.execute(
                "DELETE FROM upload_chunk WHERE attempt = ?1
                   AND NOT EXISTS (SELECT 1 FROM upload_content f WHERE f.attempt = ?1)",
                params![attempt],
            )?;
            tx.commit()
        })
        .await
    }

    async fn content(&self, sha256: &str) -> Result<Option<StoredContent>> {
        let sha256 = sha256.to_string();
        self.run(move |c| {
            c.query_row(
                "SELECT sha256, size_bytes, attempt, chunks FROM upload_content WHERE sha256 = ?1",
                params![sha256],
                |r| {
                    Ok(StoredContent {
                        sha256: r.get(0)?,
                        size_bytes: r.get(1)?,
                        attempt: r.get(2)?,
                        chunks: r.get(3)?,
                    })
                },
            )
            .optional()
        })
        .await
    }

    async fn content_chunk(&self, content: &StoredContent, seq: i64) -> Result<Option<Vec<u8>>> {
        let attempt = content.attempt.clone();
        self.run(move |c| {
            c.query_row("SELECT bytes FROM upload_chunk WHERE attempt = ?1 AND seq = ?2", params![attempt, seq], |r| {
                r.get(0)
            })
            .optional()
        })
        .await
    }

    async fn sweep_uploads(&self, now_ms: i64) -> Result<Swept> {
        self.run(move |c| {
            let tx = c.transaction()?;
            let deleted = {
                let mut stmt = tx.prepare_cached(
                    "DELETE FROM upload_content WHERE NOT EXISTS (SELECT 1 FROM upload_grant g WHERE g.sha256 = upload_content.sha256
                       AND g.state = 'stored' AND g.finished_at_ms + g.retention_secs * 1000 > ?1)
                     RETURNING sha256, size_bytes",
                )?;
                stmt.query_map(params![now_ms], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<Vec<_>>>()?
            };
            let orphan_chunks = tx.execute(
                "DELETE FROM upload_chunk WHERE attempt NOT IN (SELECT attempt FROM upload_content)
                   AND attempt NOT IN (SELECT attempt FROM upload_grant
                     WHERE state = 'uploading' AND attempt IS NOT NULL AND claimed_at_ms > ?1)",
                params![now_ms - CLAIM_LEASE_MS],
            )? as u64;
            tx.commit()?;
            Ok(Swept { deleted, orphan_chunks })
        })
        .await
    }
}

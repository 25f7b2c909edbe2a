//! The audit log: one row per tools/call outcome, session event and authentication failure.

use rusqlite::params;
use serde::{Deserialize, Serialize};

use super::{Store, StoreError};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub at_ms: i64,
    pub principal: Option<String>,
    pub token_id: Option<String>,
    /// `mcp.<tool>`, `session.open`, `session.close`, `auth.failure`.
    pub action: String,
    pub target: Option<String>,
    /// `success`, `denied`, `failure`, `pending`, `approved`.
    pub result: String,
    pub detail: Option<String>,
    pub correlation_id: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub struct AuditFilter {
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub principal: Option<String>,
    pub action_prefix: Option<String>,
    pub result: Option<String>,
    pub correlation_id: Option<String>,
    pub limit: i64,
}

impl Store {
    /// Writes a batch in one transaction (the audit writer's unit of work).
    pub fn append_audit(&self, entries: &[AuditEntry]) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO audit (at_ms, principal, token_id, action, target, result, detail, correlation_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?;
            for e in entries {
                stmt.execute(params![
                    e.at_ms,
                    e.principal,
                    e.token_id,
                    e.action,
                    e.target,
                    e.result,
                    e.detail,
                    e.correlation_id
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Newest first.
    pub fn audit(&self, f: &AuditFilter) -> Result<Vec<AuditEntry>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare_cached(
            "SELECT at_ms, principal, token_id, action, target, result, detail, correlation_id FROM audit
             WHERE (?1 IS NULL OR at_ms >= ?1) AND (?2 IS NULL OR at_ms <= ?2) AND (?3 IS NULL OR principal = ?3)
               AND (?4 IS NULL OR substr(action, 1, length(?4)) = ?4) AND (?5 IS NULL OR result = ?5)
               AND (?6 IS NULL OR correlation_id = ?6)
             ORDER BY id DESC LIMIT ?7",
        )?;
        let rows = stmt.query_map(
            params![f.since_ms, f.until_ms, f.principal, f.action_prefix, f.result, f.correlation_id, f.limit],
            |r| {
                Ok(AuditEntry {
                    at_ms: r.get(0)?,
                    principal: r.get(1)?,
                    token_id: r.get(2)?,
                    action: r.get(3)?,
                    target: r.get(4)?,
                    result: r.get(5)?,
                    detail: r.get(6)?,
                    correlation_id: r.get(7)?,
                })
            },
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

//! Rollouts in SQLite ([`crate::RolloutStore`]).

use async_trait::async_trait;
use rusqlite::params;
use toolgate_domain::StoreError;

use super::SqliteStore;
use super::executions::{status_of, steps_of};
use crate::rollouts::{RolloutStore, RolloutUnderWay};

type Result<T> = std::result::Result<T, StoreError>;

#[async_trait]
impl RolloutStore for SqliteStore {
    async fn rollouts_under_way(&self, now_ms: i64) -> Result<Vec<RolloutUnderWay>> {
        self.run(move |c| {
            let mut under_way = c.prepare_cached(
                "SELECT e.execution_id, e.steps, e.rollout, e.released_wave FROM execution e \
                 WHERE e.rollout IS NOT NULL AND e.cancelled_at_ms IS NULL AND e.deadline_ms > ?1 \
                 AND EXISTS (SELECT 1 FROM execution_target t WHERE t.execution_id = e.execution_id \
                             AND t.status = 'pending' AND t.wave > e.released_wave)",
            )?;
            let found: Vec<(String, String, String, i64)> = under_way
                .query_map(params![now_ms], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
                .collect::<rusqlite::Result<_>>()?;
            let mut released = c.prepare_cached(
                "SELECT status, updated_at_ms FROM execution_target WHERE execution_id = ?1 AND wave <= ?2",
            )?;
            let mut out = Vec::with_capacity(found.len());
            for (execution_id, steps, rollout, released_wave) in found {
                let targets = released
                    .query_map(params![execution_id, released_wave], |r| {
                        Ok((status_of(&r.get::<_, String>(0)?)?, r.get(1)?))
                    })?
                    .collect::<rusqlite::Result<_>>()?;
                let rollout = serde_json::from_str(&rollout).map_err(|e| {
                    rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, Box::new(e))
                })?;
                let steps = steps_of(&steps)?;
                out.push(RolloutUnderWay { execution_id, steps, rollout, released_wave, released: targets });
            }
            Ok(out)
        })
        .await
    }

    async fn release_wave(&self, execution_id: &str, wave: i64) -> Result<bool> {
        let execution_id = execution_id.to_string();
        self.run(move |c| {
            c.execute(
                "UPDATE execution SET released_wave = ?2 WHERE execution_id = ?1 AND released_wave = ?2 - 1",
                params![execution_id, wave],
            )
            .map(|changed| changed == 1)
        })
        .await
    }

    async fn skip_unreleased(&self, execution_id: &str, reason: &str, now_ms: i64) -> Result<u64> {
        let (execution_id, reason) = (execution_id.to_string(), reason.to_string());
        self.run(move |c| {
            c.execute(
                "UPDATE execution_target SET status = 'skipped', error = ?2, updated_at_ms = ?3 \
                 WHERE execution_id = ?1 AND status = 'pending' \
                 AND wave > (SELECT released_wave FROM execution WHERE execution_id = ?1)",
                params![execution_id, reason, now_ms],
            )
            .map(|n| n as u64)
        })
        .await
    }
}

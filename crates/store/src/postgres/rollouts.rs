//! Rollouts in PostgreSQL ([`crate::RolloutStore`]): a wave released on one replica reaches
//! the agents connected to the others as a new execution would.

use async_trait::async_trait;
use toolgate_domain::StoreError;

use super::executions::status_of;
use super::{Pg, PostgresStore, execute, pg, rows};
use crate::changes::Change;
use crate::rollouts::{RolloutStore, RolloutUnderWay};

type Result<T> = std::result::Result<T, StoreError>;

#[async_trait]
impl RolloutStore for PostgresStore {
    async fn rollouts_under_way(&self, now_ms: i64) -> Result<Vec<RolloutUnderWay>> {
        pg(async {
            let c = self.conn().await?;
            let found = rows(
                &*c,
                "SELECT e.execution_id, e.steps, e.rollout, e.released_wave FROM execution e
                 WHERE e.rollout IS NOT NULL AND e.cancelled_at_ms IS NULL AND e.deadline_ms > $1
                   AND EXISTS (SELECT 1 FROM execution_target t WHERE t.execution_id = e.execution_id
                               AND t.status = 'pending' AND t.wave > e.released_wave)",
                &[&now_ms],
            )
            .await?;
            let mut out = Vec::with_capacity(found.len());
            for r in &found {
                let (execution_id, released_wave): (String, i64) = (r.try_get(0)?, r.try_get(3)?);
                let released = rows(
                    &*c,
                    "SELECT status, updated_at_ms FROM execution_target WHERE execution_id = $1 AND wave <= $2",
                    &[&execution_id, &released_wave],
                )
                .await?
                .iter()
                .map(|t| Ok((status_of(t.try_get(0)?)?, t.try_get(1)?)))
                .collect::<Pg<_>>()?;
                let (steps, rollout): (String, String) = (r.try_get(1)?, r.try_get(2)?);
                out.push(RolloutUnderWay {
                    execution_id,
                    steps: serde_json::from_str(&steps)?,
                    rollout: serde_json::from_str(&rollout)?,
                    released_wave,
                    released,
                });
            }
            Ok(out)
        })
        .await
    }

    async fn release_wave(&self, execution_id: &str, wave: i64) -> Result<bool> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            let released = execute(
                &tx,
                "UPDATE execution SET released_wave = $2::bigint WHERE execution_id = $1 AND released_wave = $2::bigint - 1",
                &[&execution_id, &wave],
            )
            .await?
                == 1;
            if released {
                self.notify(&tx, Change::ExecutionCreated(execution_id.to_string())).await?;
            }
            tx.commit().await?;
            Ok(released)
        })
        .await
    }

    async fn skip_unreleased(&self, execution_id: &str, reason: &str, now_ms: i64) -> Result<u64> {
        pg(async {
            let c = self.conn().await?;
            execute(
                &*c,
                "UPDATE execution_target t SET status = 'skipped', error = $2, updated_at_ms = $3 FROM execution e
                 WHERE t.execution_id = $1 AND e.execution_id = $1 AND t.status = 'pending' AND t.wave > e.released_wave",
                &[&execution_id, &reason, &now_ms],
            )
            .await
        })
        .await
    }
}

//! Rollouts: executions sent a wave at a time
//! ([`toolgate_domain::fleet::rollout::Rollout`]). The sweep looks at those under
//! way about once a second: a wave is released (on one replica, by compare-and-set in the
//! store; every replica then sends it to the agents connected to it), or, past the failure
//! budget or under an engaged kill switch, the waves not started are skipped with the reason.

use toolgate_domain::StoreError;
use toolgate_domain::fleet::rollout::Next;

use crate::hub::Hub;

impl Hub {
    /// Moves every rollout under way on as far as it may go now.
    pub(crate) async fn advance_rollouts(&self, now: i64) -> Result<(), StoreError> {
        for under_way in self.work.rollouts_under_way(now).await? {
            let execution_id = &under_way.execution_id;
            let next = match self.stopping(&under_way.steps) {
                Some(switch) => Next::Stop(format!("skipped, never sent: {}", switch.refusal())),
                None => under_way.rollout.next(under_way.released_wave, &under_way.released, now),
            };
            match next {
                Next::Wait => {}
                Next::Stop(reason) => {
                    let skipped = self.work.skip_unreleased(execution_id, &reason, now).await?;
                    tracing::warn!(%execution_id, skipped, "the rollout stopped: {reason}");
                    drop(self.execution_updates.send(execution_id.clone()));
                }
                Next::Release(wave) => {
                    if self.work.release_wave(execution_id, wave).await? {
                        tracing::info!(%execution_id, wave = wave + 1, "the next wave is released");
                        self.deliver_here(execution_id).await?;
                        drop(self.execution_updates.send(execution_id.clone()));
                    }
                }
            }
        }
        Ok(())
    }
}

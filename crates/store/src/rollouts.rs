//! What the store keeps of rollouts (executions sent in waves, [`Rollout`]): the sweep reads
//! those under way, releases their next wave (once, whichever replica gets there first) or
//! skips the waves not released.

use async_trait::async_trait;
use toolgate_domain::StoreError;
use toolgate_domain::fleet::instruction::TargetStatus;
use toolgate_domain::fleet::rollout::Rollout;
use toolgate_domain::fleet::wire::RunStep;

type Result<T> = std::result::Result<T, StoreError>;

/// Where an execution's waves stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RolloutState {
    pub rollout: Rollout,
    /// The last wave released (0-based): its targets and those before may be sent.
    pub released_wave: i64,
    /// How many waves its targets make.
    pub waves: i64,
}

impl RolloutState {
    /// From the stored columns (`rollout` JSON, null without one) and the target counts.
    pub fn read(
        rollout: Option<&str>,
        released_wave: i64,
        counts: &[(TargetStatus, i64)],
    ) -> serde_json::Result<Option<Self>> {
        let Some(text) = rollout else { return Ok(None) };
        let rollout: Rollout = serde_json::from_str(text)?;
        let targets = counts.iter().map(|(_, n)| *n as usize).sum();
        Ok(Some(RolloutState { rollout, released_wave, waves: rollout.waves(targets) }))
    }
}

/// A rollout with waves still to release, as the sweep needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct RolloutUnderWay {
    pub execution_id: String,
    pub steps: Vec<RunStep>,
    pub rollout: Rollout,
    pub released_wave: i64,
    /// (status, last change) of every target of the waves released so far.
    pub released: Vec<(TargetStatus, i64)>,
}

#[async_trait]
pub trait RolloutStore: Send + Sync {
    /// The rollouts neither cancelled nor past their deadline at `now_ms` that have targets in
    /// waves not yet released.
    async fn rollouts_under_way(&self, now_ms: i64) -> Result<Vec<RolloutUnderWay>>;
    /// Releases `wave`, the one after the last released: its targets may be sent from now on
    /// (other replicas hear of it as of a new execution). False when it was released already.
    async fn release_wave(&self, execution_id: &str, wave: i64) -> Result<bool>;
    /// The targets of waves not released become `skipped`, with `reason`. How many.
    async fn skip_unreleased(&self, execution_id: &str, reason: &str, now_ms: i64) -> Result<u64>;
}

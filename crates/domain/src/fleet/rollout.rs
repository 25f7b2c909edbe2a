//! Waves: a change to many hosts sent a batch at a time. Each target's wave is fixed when the
//! execution is stored (its place in the target list, in batches), and the execution keeps
//! the last wave released: only targets of released waves are ever sent, whichever replica
//! an agent connects to. The next wave is released when every target of those released has
//! ended, the failures stay within the budget and the pause has passed; past the budget, the
//! waves not released are `skipped`, saying why.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::instruction::TargetStatus;

/// How a rollout is cut and paced, as `execute_instruction`'s `rollout` asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rollout {
    pub batch: Batch,
    /// How many targets may fail, over all waves, before the rest are skipped.
    pub max_failures: u32,
    /// The pause after a wave ends before the next starts.
    pub pause_ms: u64,
}

/// A wave's size: a number of hosts, or a share of the targets (rounded up, at least one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Batch {
    Hosts(u32),
    Percent(u8),
}

/// What a rollout does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// A released target has not ended, or the pause is not over.
    Wait,
    /// Release this wave (the one after the last released).
    Release(i64),
    /// Skip every wave not released, with this reason.
    Stop(String),
}

/// Whether a target in this status counts against the failure budget.
fn failed(status: TargetStatus) -> bool {
    matches!(
        status,
        TargetStatus::Failed
            | TargetStatus::TimedOut
            | TargetStatus::Offline
            | TargetStatus::Refused
            | TargetStatus::PlanChanged
            | TargetStatus::Cancelled
    )
}

impl Rollout {
    /// Reads `rollout` as the tool takes it: `{batch: N | "P%", max_failures, pause_ms}`.
    pub fn from_argument(value: &Value) -> Result<Self, String> {
        let batch = match &value["batch"] {
            Value::Number(n) => match n.as_u64().and_then(|n| u32::try_from(n).ok()).filter(|n| *n >= 1) {
                Some(n) => Batch::Hosts(n),
                None => return Err(format!("rollout.batch {n} is not a whole number of hosts (1 or more)")),
            },
            Value::String(s) => {
                match s.strip_suffix('%').and_then(|p| p.parse::<u8>().ok()).filter(|p| (1..=100).contains(p)) {
                    Some(p) => Batch::Percent(p),
                    None => {
                        return Err(format!(
                            "rollout.batch `{s}` is neither a number of hosts nor a share like \"25%\" (1% to 100%)"
                        ));
                    }
                }
            }
            _ => return Err("rollout.batch is required: a number of hosts per wave, or a share like \"25%\"".into()),
        };
        let whole = |name: &str| match value.get(name) {
            None | Some(Value::Null) => Ok(0),
            Some(v) => v.as_u64().ok_or(format!("rollout.{name} must be a whole number")),
        };
        let max_failures =
            u32::try_from(whole("max_failures")?).map_err(|_| "rollout.max_failures is too large".to_string())?;
        Ok(Rollout { batch, max_failures, pause_ms: whole("pause_ms")? })
    }

    /// How many targets each wave has, out of `targets`.
    pub fn wave_size(&self, targets: usize) -> usize {
        let size = match self.batch {
            Batch::Hosts(n) => n as usize,
            Batch::Percent(p) => (targets * p as usize).div_ceil(100),
        };
        size.max(1)
    }

    /// The wave of the target at `index` in the list of `targets`.
    pub fn wave_of(&self, index: usize, targets: usize) -> i64 {
        (index / self.wave_size(targets)) as i64
    }

    /// How many waves `targets` make.
    pub fn waves(&self, targets: usize) -> i64 {
        targets.div_ceil(self.wave_size(targets)) as i64
    }

    /// What comes after wave `released` (0-based), given the (status, last change) of every
    /// target released so far, at `now_ms`.
    pub fn next(&self, released: i64, targets: &[(TargetStatus, i64)], now_ms: i64) -> Next {
        if targets.iter().any(|(status, _)| !status.is_final()) {
            return Next::Wait;
        }
        let failures = targets.iter().filter(|(status, _)| failed(*status)).count();
        if failures > self.max_failures as usize {
            return Next::Stop(format!(
                "skipped: {failures} host(s) did not succeed in wave(s) 1-{}, more than max_failures ({}) allows",
                released + 1,
                self.max_failures
            ));
        }
        let ended = targets.iter().map(|(_, at)| *at).max().unwrap_or(now_ms);
        match now_ms >= ended.saturating_add(self.pause_ms as i64) {
            true => Next::Release(released + 1),
            false => Next::Wait,
        }
    }
}

#[cfg(test)]
#[path = "rollout_tests.rs"]
mod tests;

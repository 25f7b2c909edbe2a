//! Fleet-wide experience summaries, kept for one sample interval (docs/experience.md, "At
//! scale"): an answer over every device's hours or days that the recent views do not hold
//! (get_dex_perf_fleet over 7 or 30 days, a cohort diff over them) reads millions of rollup
//! rows at 10,000 devices, while what it summarises changes at most once a sample interval. A summary is kept per tool, caller's reach and arguments, so a caller
//! confined to its groups never reads another reach's; it says when it was made
//! (`generated_at_ms`), and is made again once older than the interval.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;

/// The most summaries kept; past it the oldest goes.
const MAX_KEPT: usize = 256;

#[derive(Default)]
pub struct Summaries {
    kept: Mutex<HashMap<String, (i64, Value)>>,
}

impl Summaries {
    /// The summary `key` names if made within `max_age_ms` of `now_ms`.
    pub fn fresh(&self, key: &str, now_ms: i64, max_age_ms: i64) -> Option<Value> {
        let kept = self.kept.lock().ok()?;
        kept.get(key).filter(|(made, _)| now_ms - made < max_age_ms && *made <= now_ms).map(|(_, v)| v.clone())
    }

    /// Keeps `summary` as made at `now_ms`.
    pub fn keep(&self, key: String, now_ms: i64, summary: &Value) {
        let Ok(mut kept) = self.kept.lock() else { return };
        if kept.len() >= MAX_KEPT && !kept.contains_key(&key) {
            let oldest = kept.iter().min_by_key(|(_, (made, _))| *made).map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                kept.remove(&oldest);
            }
        }
        kept.insert(key, (now_ms, summary.clone()));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_summary_is_kept_for_its_age_and_the_oldest_goes_first() {
        let summaries = Summaries::default();
        summaries.keep("fleet/24h".into(), 1_000, &json!({"p50": 1}));
        assert_eq!(summaries.fresh("fleet/24h", 60_999, 60_000), Some(json!({"p50": 1})));
        assert_eq!(summaries.fresh("fleet/24h", 61_000, 60_000), None, "made again once a sample interval old");
        assert_eq!(summaries.fresh("fleet/7d", 1_000, 60_000), None, "another key");
        assert_eq!(summaries.fresh("fleet/24h", 999, 60_000), None, "a clock that went back");
        for n in 0..MAX_KEPT {
            summaries.keep(format!("k{n}"), 2_000 + n as i64, &json!(n));
        }
        assert_eq!(summaries.fresh("fleet/24h", 2_000, 60_000), None, "the oldest went");
        assert_eq!(summaries.fresh("k0", 2_000, 60_000), Some(json!(0)));
    }
}

//! Signals (docs/experience.md): what a device's experience says that someone should look at,
//! declared in `experience.yaml` beside the catalogue and checked by the build. A signal
//! watches one metric (`experience::METRICS`): it fires when that many consecutive samples are
//! above (or below) its threshold, and ends at the first sample that is not. Counting samples,
//! not minutes, keeps a window a few samples long whatever the interval the server sets.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// `experience.yaml`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(title = "toolgate experience.yaml"))]
#[serde(deny_unknown_fields)]
pub struct SignalsFile {
    pub signals: Vec<SignalType>,
}

/// How much a signal matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SignalType {
    /// What the tools call it (`obs_type`): `[a-z][a-z0-9_]*`, unique.
    pub name: String,
    pub title: String,
    /// The metric it watches.
    pub metric: String,
    /// It holds while the metric is above this…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above: Option<f64>,
    /// …or below this (exactly one of the two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below: Option<f64>,
    /// Consecutive samples it must hold in before it fires (1: a single sample).
    pub samples: u32,
    pub severity: Severity,
    /// What an administrator should look at next.
    pub check_next: String,
}

impl SignalType {
    /// Whether one sample's value meets the condition.
    pub fn holds(&self, value: f64) -> bool {
        match (self.above, self.below) {
            (Some(above), _) => value > above,
            (None, Some(below)) => value < below,
            (None, None) => false,
        }
    }

    /// The condition in words: `cpu_busy_pct > 90 for 3 samples`.
    pub fn condition(&self) -> String {
        let (sign, threshold) = match (self.above, self.below) {
            (Some(above), _) => (">", above),
            (None, Some(below)) => ("<", below),
            (None, None) => ("?", 0.0),
        };
        let samples =
            if self.samples == 1 { "1 sample".to_string() } else { format!("{} consecutive samples", self.samples) };
        format!("{} {sign} {threshold} in {samples}", self.metric)
    }
}

/// The JSON Schema of one occurrence of a signal, as the signal tools answer it.
pub fn occurrence_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "obs_type": {"type": "string", "description": "The signal's name in experience.yaml."},
            "agent_id": {"type": "string"},
            "started_ms": {"type": "integer", "description": "The first of the samples that made it fire."},
            "last_ms": {"type": "integer", "description": "The newest sample that held."},
            "ended_ms": {"type": ["integer", "null"], "description": "The first sample that did not hold; null while it holds."},
            "peak": {"type": "number", "description": "The furthest value past the threshold while it held."},
        },
        "required": ["obs_type", "agent_id", "started_ms", "last_ms", "ended_ms", "peak"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_holds_past_its_threshold_only() {
        let above = SignalType {
            name: "cpu_high".into(),
            title: "High CPU".into(),
            metric: "cpu_busy_pct".into(),
            above: Some(90.0),
            below: None,
            samples: 3,
            severity: Severity::Warning,
            check_next: "x".into(),
        };
        assert!(above.holds(95.0) && !above.holds(90.0));
        assert_eq!(above.condition(), "cpu_busy_pct > 90 in 3 consecutive samples");
        let below = SignalType { above: None, below: Some(10.0), samples: 1, ..above };
        assert!(below.holds(5.0) && !below.holds(10.0));
        assert_eq!(below.condition(), "cpu_busy_pct < 10 in 1 sample");
    }
}

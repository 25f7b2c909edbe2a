//! Experience reports (docs/experience.md): agents of protocol 5 are asked for them in their
//! welcome when the hub keeps them, and send batches over report connections; each batch is
//! kept, then watched for the signals of experience.yaml.

use std::collections::BTreeSet;
use std::sync::Arc;

use toolgate_domain::StoreError;
use toolgate_domain::fleet::experience::{ExperienceReport, ExperienceSettings};
use toolgate_domain::fleet::signals::SignalType;
use toolgate_store::{ExperienceStore, ExperienceSwept, Observed};

use crate::hub::Hub;

impl Hub {
    /// Keeps the experience agents report in `store` and watches it for `signals`
    /// (experience.yaml); without a store agents are not asked.
    pub fn with_experience(mut self, store: Arc<dyn ExperienceStore>, signals: Vec<SignalType>) -> Self {
        self.experience = Some(store);
        self.signals = signals;
        self
    }

    /// What the welcome of an agent speaking `protocol` asks it to measure.
    pub(crate) fn experience_settings(&self, protocol: u32) -> Option<ExperienceSettings> {
        (protocol >= 5 && self.experience.is_some()).then_some(ExperienceSettings {
            sample_interval_ms: self.settings().experience_sample_ms,
            report_interval_ms: self.settings().experience_report_ms,
        })
    }

    /// Keeps a report's samples; how many values were new. A sample older than raw samples
    /// are kept is dropped: its raw row may be gone already, and its hour counted.
    pub async fn take_experience(&self, agent_id: &str, report: ExperienceReport) -> Result<u64, StoreError> {
        // Never asked for: an agent sending it anyway is not dropped for it.
        let Some(store) = &self.experience else { return Ok(0) };
        let now = self.clock().now_ms();
        let oldest = now - self.settings().experience_retention.raw_ms;
        let mut report = report;
        let before = report.samples.len();
        report.samples.retain(|s| s.at_ms >= oldest);
        if report.samples.len() < before {
            tracing::info!(%agent_id, dropped = before - report.samples.len(), "experience samples older than raw samples are kept: not kept");
        }
        let saved = store.keep_experience(agent_id, &report, now).await?;
        let added = saved.added;
        if let Err(e) = self.view_after_report(agent_id, &report, saved).await {
            // Kept all the same: a read finds the view out of date and makes it itself.
            tracing::warn!(%agent_id, "the recent view of the device could not be made again: {e}");
        }
        // The signals of the metrics this batch has: their windows read, and what they say
        // recorded, in one store call each (not two per signal: every report pays for these).
        let batch: BTreeSet<&str> = report.samples.iter().flat_map(|s| s.values.keys().map(String::as_str)).collect();
        let watched: Vec<(&SignalType, usize)> = self
            .signals
            .iter()
            .filter(|s| batch.contains(s.metric.as_str()))
            .map(|s| (s, s.samples.max(1) as usize))
            .collect();
        if watched.is_empty() {
            return Ok(added);
        }
        let wanted: Vec<(&str, usize)> = watched.iter().map(|(s, window)| (s.metric.as_str(), *window)).collect();
        let recent = store.recent_values(agent_id, &wanted).await?;
        let seen: Vec<(&str, Observed)> = watched
            .iter()
            .zip(&recent)
            .filter_map(|((signal, window), values)| Some((signal.name.as_str(), observed(signal, values, *window)?)))
            .collect();
        if !seen.is_empty() {
            store.observe(agent_id, &seen).await?;
        }
        Ok(added)
    }

    /// The signals experience is watched for.
    pub fn signals(&self) -> &[SignalType] {
        &self.signals
    }

    /// Deletes what the retention no longer keeps (the server runs it every minute).
    pub async fn sweep_experience(&self) -> Result<ExperienceSwept, StoreError> {
        match &self.experience {
            Some(store) => store.sweep_experience(self.clock().now_ms(), self.settings().experience_retention).await,
            None => Ok(ExperienceSwept::default()),
        }
    }
}

/// What a device's newest values (newest first) say of `signal`: it holds when the `window`
/// newest all meet it; it ended when the newest does not; nothing yet otherwise (too few
/// samples, or it is on its way).
fn observed(signal: &SignalType, recent: &[(i64, f64)], window: usize) -> Option<Observed> {
    let (newest_ms, newest) = *recent.first()?;
    if !signal.holds(newest) {
        return Some(Observed::Ended { at_ms: newest_ms });
    }
    if recent.len() < window || !recent.iter().all(|(_, v)| signal.holds(*v)) {
        return None;
    }
    let rising = signal.above.is_some();
    let values = recent.iter().map(|(_, v)| *v);
    let peak = if rising { values.fold(f64::MIN, f64::max) } else { values.fold(f64::MAX, f64::min) };
    let started_ms = recent.last().map_or(newest_ms, |(at, _)| *at);
    Some(Observed::Holding { started_ms, last_ms: newest_ms, peak, rising })
}

#[cfg(test)]
mod tests {
    use toolgate_domain::fleet::signals::Severity;

    use super::*;

    #[test]
    fn a_signal_fires_after_its_window_and_ends_at_the_first_sample_below() {
        let signal = SignalType {
            name: "cpu_high".into(),
            title: "t".into(),
            metric: "cpu_busy_pct".into(),
            above: Some(90.0),
            below: None,
            samples: 3,
            severity: Severity::Warning,
            check_next: "c".into(),
        };
        assert_eq!(observed(&signal, &[(3, 95.0), (2, 99.0)], 3), None, "two samples are not three");
        assert_eq!(observed(&signal, &[(3, 95.0), (2, 80.0), (1, 99.0)], 3), None);
        assert_eq!(
            observed(&signal, &[(3, 95.0), (2, 99.0), (1, 91.0)], 3),
            Some(Observed::Holding { started_ms: 1, last_ms: 3, peak: 99.0, rising: true })
        );
        assert_eq!(observed(&signal, &[(4, 50.0), (3, 95.0)], 3), Some(Observed::Ended { at_ms: 4 }));
        assert_eq!(observed(&signal, &[], 3), None);
    }
}

//! Experience reports (docs/experience.md): agents of protocol 5 are asked for them in their
//! welcome when the hub keeps them, and send batches over report connections.

use std::sync::Arc;

use toolgate_domain::StoreError;
use toolgate_domain::fleet::experience::{ExperienceReport, ExperienceSettings};
use toolgate_store::{ExperienceStore, ExperienceSwept};

use crate::hub::Hub;

impl Hub {
    /// Keeps the experience agents report in `store`; without it agents are not asked.
    pub fn with_experience(mut self, store: Arc<dyn ExperienceStore>) -> Self {
        self.experience = Some(store);
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
        store.save_experience(agent_id, &report, now).await
    }

    /// Deletes what the retention no longer keeps (the server runs it every minute).
    pub async fn sweep_experience(&self) -> Result<ExperienceSwept, StoreError> {
        match &self.experience {
            Some(store) => store.sweep_experience(self.clock().now_ms(), self.settings().experience_retention).await,
            None => Ok(ExperienceSwept::default()),
        }
    }
}

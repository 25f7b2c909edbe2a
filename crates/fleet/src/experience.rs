//! Experience reports (docs/experience.md): agents of protocol 5 are asked for them in their
//! welcome when the hub keeps them, and send batches over report connections.

use std::sync::Arc;

use toolgate_domain::StoreError;
use toolgate_domain::fleet::experience::{ExperienceReport, ExperienceSettings};
use toolgate_store::ExperienceStore;

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

    /// Keeps a report's samples; how many values were new.
    pub async fn take_experience(&self, agent_id: &str, report: &ExperienceReport) -> Result<u64, StoreError> {
        match &self.experience {
            Some(store) => store.save_experience(agent_id, report, self.clock().now_ms()).await,
            // Never asked for: an agent sending it anyway is not dropped for it.
            None => Ok(0),
        }
    }
}

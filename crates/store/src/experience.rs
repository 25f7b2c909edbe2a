//! The endpoint experience agents measure (docs/experience.md): the store's trait. Samples are
//! kept one row per agent, metric and time, so a batch an agent sends again (its answer was
//! lost) is kept once. Every read is confined to the agents the reader's reach covers, in the
//! query itself.

use std::collections::BTreeMap;

use async_trait::async_trait;
use toolgate_domain::StoreError;
use toolgate_domain::fleet::experience::ExperienceReport;
use toolgate_domain::groups::Reach;

pub(crate) type Result<T> = std::result::Result<T, StoreError>;

/// One device's newest experience: what its last report said it measured and could not, and
/// the newest value of each metric.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceExperience {
    pub agent_id: String,
    /// `host` or `cgroup`.
    pub measured: String,
    /// Each metric it cannot give, and why.
    pub absent: BTreeMap<String, String>,
    pub fullest_filesystem: Option<String>,
    pub last_sample_ms: i64,
    /// Metric → (when, value), the newest of each.
    pub latest: BTreeMap<String, (i64, f64)>,
}

#[async_trait]
pub trait ExperienceStore: Send + Sync {
    /// Keeps a report's samples (one already kept is kept once) and what it says of its
    /// device; how many values were new.
    async fn save_experience(&self, agent_id: &str, report: &ExperienceReport, received_at_ms: i64) -> Result<u64>;
    /// The newest experience of every device `reach` covers (or of `agent_id` alone), in
    /// agent order.
    async fn device_experience(&self, reach: &Reach, agent_id: Option<&str>) -> Result<Vec<DeviceExperience>>;
}

/// `measured` as stored.
pub(crate) fn measured_name(report: &ExperienceReport) -> &'static str {
    match report.measured {
        toolgate_domain::fleet::experience::Measured::Host => "host",
        toolgate_domain::fleet::experience::Measured::Cgroup => "cgroup",
    }
}

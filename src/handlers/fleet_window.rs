//! The fleet over a window, as `get_dex_perf_fleet` and `get_network_fleet` read it: the devices
//! the caller sees, their newest experience, and the spread of each metric's averages.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_domain::ToolError;
use toolgate_domain::fleet::experience::{METRICS, Metric};
use toolgate_store::{DeviceExperience, Resolution};

use super::{DAY_WINDOW, Device, devices, recent_views, reporting};
use crate::handlers::spread::{Spread, rounded};
use crate::services::ToolContext;

/// The fleet over a window: the devices the caller sees, their newest experience, and the
/// spread of their averages by metric.
pub(crate) struct FleetWindow {
    pub(crate) seen: BTreeMap<String, Device>,
    pub(crate) experience: Vec<Arc<DeviceExperience>>,
    by_metric: BTreeMap<String, Spread>,
    /// By metric: how many devices say they cannot measure it.
    absent_on: BTreeMap<String, usize>,
}

impl FleetWindow {
    /// The fleet over `window` (which starts at `since_ms`, read at `resolution`): the day
    /// window from the recent views, any other from the store.
    pub(crate) async fn read(
        ctx: &ToolContext,
        window: &str,
        since_ms: i64,
        resolution: Resolution,
    ) -> Result<FleetWindow, ToolError> {
        let seen: BTreeMap<String, Device> = devices(ctx).await?.into_iter().map(|d| (d.agent_id.clone(), d)).collect();
        let mut by_metric: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        if window == DAY_WINDOW {
            let views = recent_views(ctx).await?;
            let views = views.each_of(seen.keys().map(String::as_str));
            let mut experience = Vec::with_capacity(views.len());
            // One pass over the devices, each view's averages read by position (10,000 devices
            // times 24 metrics: a lookup per pair by name cost more than the rest of the call).
            let mut averages: Vec<Vec<f64>> = vec![Vec::with_capacity(views.len()); METRICS.len()];
            for view in views {
                for (i, average) in view.day_averages().enumerate() {
                    averages[i].extend(average);
                }
                experience.push(view.experience.clone());
            }
            for (metric, values) in METRICS.iter().zip(averages).filter(|(_, v)| !v.is_empty()) {
                by_metric.insert(metric.name.to_string(), values);
            }
            return Ok(FleetWindow::spread(seen, experience, by_metric));
        }
        let store = &ctx.services().repositories().experience;
        let experience: Vec<Arc<DeviceExperience>> = store
            .device_experience(ctx.reach(), None)
            .await?
            .into_iter()
            .filter(|d| seen.contains_key(&d.agent_id))
            .map(Arc::new)
            .collect();
        let declared: Vec<&str> = METRICS.iter().map(|m| m.name).collect();
        for averaged in store.averages(ctx.reach(), &declared, since_ms, resolution).await? {
            if seen.contains_key(&averaged.agent_id) {
                by_metric.entry(averaged.metric).or_default().push(averaged.average);
            }
        }
        Ok(FleetWindow::spread(seen, experience, by_metric))
    }

    fn spread(
        seen: BTreeMap<String, Device>,
        experience: Vec<Arc<DeviceExperience>>,
        averages: BTreeMap<String, Vec<f64>>,
    ) -> FleetWindow {
        let by_metric =
            averages.into_iter().filter_map(|(metric, mut values)| Some((metric, Spread::of(&mut values)?))).collect();
        let mut absent_on: BTreeMap<String, usize> = BTreeMap::new();
        for metric in experience.iter().flat_map(|d| d.absent.keys()) {
            match absent_on.get_mut(metric) {
                Some(count) => *count += 1,
                None => drop(absent_on.insert(metric.clone(), 1)),
            }
        }
        FleetWindow { seen, experience, by_metric, absent_on }
    }

    /// How many devices report, have stopped, never did, and what they measure.
    pub(crate) fn devices(&self, ctx: &ToolContext, now: i64) -> Value {
        let reporting_now = self.experience.iter().filter(|d| reporting(ctx, d.last_sample_ms, now)).count();
        let measured = |how: &str| self.experience.iter().filter(|d| d.measured == how).count();
        json!({
            "reporting": reporting_now,
            "not_reporting": self.experience.len() - reporting_now,
            "never_reported": self.seen.len() - self.experience.len(),
            "measured_host": measured("host"),
            "measured_cgroup": measured("cgroup"),
        })
    }

    /// Per metric: the p50, p90 and p99 across devices of each one's average, the largest, how
    /// many measured it and how many say they cannot.
    pub(crate) fn percentiles<'a>(&self, metrics: impl Iterator<Item = &'a Metric>) -> Vec<Value> {
        metrics
            .map(|m| {
                let spread = self.by_metric.get(m.name);
                let at = |pick: fn(&Spread) -> f64| spread.map(|s| rounded(pick(s)));
                json!({
                    "metric": m.name, "unit": m.unit, "devices": spread.map_or(0, |s| s.devices),
                    "p50": at(|s| s.p50), "p90": at(|s| s.p90), "p99": at(|s| s.p99), "max": at(|s| s.max),
                    "absent_on": self.absent_on.get(m.name).copied().unwrap_or(0),
                })
            })
            .collect()
    }
}

//! Recent views of devices' experience (docs/experience.md, "At scale"). At 10,000 devices the
//! default fleet reads (the 24-hour window of every metric, the last 15 minutes of a ranked
//! one) would aggregate millions of store rows per call. Instead the server keeps, per device,
//! what those reads need: each metric's count and sum over the window's hours, the hourly
//! averages and the raw samples of the ranked metrics; about 2 KB a device.
//!
//! A view is what the store would answer. It is made from the store's rows, and carried forward
//! by each report that brings the device something new: by the report's own values when they
//! were all new and the view is at the revision just before the report's (the common case:
//! three store reads a report saved, at 170 reports a second), made again from the store
//! otherwise. A read makes it again whenever it finds it out of date: made in an earlier hour
//! (the window moved), or at an older revision of the device (another replica took a report).
//! A read therefore answers from views only when they are current, reading the store for those
//! that are not.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use toolgate_domain::StoreError;
use toolgate_domain::fleet::experience::{ExperienceReport, METRICS, RANKED, Sample};
use toolgate_domain::groups::Reach;
use toolgate_store::{DeviceExperience, ExperienceStore, HOUR_MS, RecentRows, RecentWanted, Saved};

use crate::hub::Hub;

/// The hours of the day window: the current one and the 23 before it.
pub const VIEW_HOURS: i64 = 24;
/// How far back a view keeps the ranked metrics' raw samples: list_dex_perf_devices' default
/// window (a longer one is read from the store).
pub const VIEW_RAW_MS: i64 = 15 * 60_000;
/// Devices read from the store in one call when many views are made at once, so that the
/// connection is not held for seconds.
const MADE_AT_ONCE: usize = 500;

/// Where the day window starts at `now_ms`: the start of the hour 23 hours before the current.
pub fn day_since(now_ms: i64) -> i64 {
    hour_of(now_ms) - (VIEW_HOURS - 1) * HOUR_MS
}

fn hour_of(ms: i64) -> i64 {
    ms - ms.rem_euclid(HOUR_MS)
}

/// One device's recent experience, as the store had it at `experience.revision`.
#[derive(Debug)]
pub struct DeviceView {
    /// Shared, so that a read over the whole fleet keeps it rather than copies it.
    pub experience: Arc<DeviceExperience>,
    /// The hour it was made in: its day window holds within that hour.
    hour_ms: i64,
    /// Per entry of METRICS: the count and sum of its samples over the day window.
    totals: Vec<(i64, f64)>,
    /// Per entry of RANKED: each hour's (start, count, sum) in the day window, oldest first.
    hours: Vec<Vec<(i64, i64, f64)>>,
    /// Per entry of RANKED: its raw samples (at, value) from VIEW_RAW_MS before it was made.
    raw: Vec<Vec<(i64, f64)>>,
}

impl DeviceView {
    fn made(rows: RecentRows, now_ms: i64) -> DeviceView {
        let mut totals = vec![(0, 0.0); METRICS.len()];
        let mut hours = vec![Vec::new(); RANKED.len()];
        for (metric, start_ms, count, sum) in rows.hours {
            if let Some(i) = METRICS.iter().position(|m| m.name == metric) {
                totals[i].0 += count;
                totals[i].1 += sum;
            }
            if let Some(i) = RANKED.iter().position(|(_, m)| *m == metric)
                && count > 0
            {
                hours[i].push((start_ms, count, sum));
            }
        }
        let mut raw = vec![Vec::new(); RANKED.len()];
        for (metric, at_ms, value) in rows.raw {
            if let Some(i) = RANKED.iter().position(|(_, m)| *m == metric) {
                raw[i].push((at_ms, value));
            }
        }
        DeviceView { experience: Arc::new(rows.device), hour_ms: hour_of(now_ms), totals, hours, raw }
    }

    /// The average of `metric` (a METRICS name) over the day window, when it has samples.
    pub fn day_average(&self, metric: &str) -> Option<f64> {
        let i = METRICS.iter().position(|m| m.name == metric)?;
        let (count, sum) = self.totals[i];
        (count > 0).then(|| sum / count as f64)
    }

    /// Each metric's average over the day window, in METRICS' order (none: no samples).
    pub fn day_averages(&self) -> impl Iterator<Item = Option<f64>> + '_ {
        self.totals.iter().map(|(count, sum)| (*count > 0).then(|| sum / *count as f64))
    }

    /// The hourly averages of a ranked metric (RANKED's metric name) over the day window.
    pub fn day_hours(&self, metric: &str) -> impl Iterator<Item = (i64, f64)> + '_ {
        let hours = RANKED.iter().position(|(_, m)| *m == metric).map_or(&[][..], |i| &self.hours[i][..]);
        hours.iter().map(|(start_ms, count, sum)| (*start_ms, sum / *count as f64))
    }

    /// The raw samples of a ranked metric at or after `since_ms`, which must be within
    /// VIEW_RAW_MS of now (the caller checks its window against VIEW_RAW_MS).
    pub fn raw_since(&self, metric: &str, since_ms: i64) -> &[(i64, f64)] {
        let Some(i) = RANKED.iter().position(|(_, m)| *m == metric) else { return &[] };
        let samples = &self.raw[i];
        &samples[samples.partition_point(|(at, _)| *at < since_ms)..]
    }

    fn current(&self, revision: i64, now_ms: i64) -> bool {
        self.experience.revision == revision && self.hour_ms == hour_of(now_ms)
    }

    /// This view carried forward by the `samples` of a report whose values were all new and
    /// which left the device as `device` is: what a view made from the store now would hold,
    /// but for the order in which the day's sums were added. None when it cannot be: the
    /// report's revision does not follow this view's (another replica took one between), or
    /// the hour changed since it was made (the window moved on).
    fn carried(&self, device: DeviceExperience, samples: &[Sample], now_ms: i64) -> Option<DeviceView> {
        if device.revision != self.experience.revision + 1 || self.hour_ms != hour_of(now_ms) {
            return None;
        }
        let (day_since_ms, raw_since_ms) = (day_since(now_ms), now_ms - VIEW_RAW_MS);
        let mut totals = self.totals.clone();
        // Each hour's values of the report summed before they are added, as the store's
        // rollups add them, so that an hour's sum is the store's to the last bit.
        let mut hours_added: Vec<Vec<(i64, i64, f64)>> = vec![Vec::new(); RANKED.len()];
        let mut raw: Vec<Vec<(i64, f64)>> =
            self.raw.iter().map(|r| r[r.partition_point(|(at, _)| *at < raw_since_ms)..].to_vec()).collect();
        for sample in samples {
            let hour_ms = hour_of(sample.at_ms);
            for (metric, value) in &sample.values {
                if hour_ms >= day_since_ms
                    && let Some(i) = METRICS.iter().position(|m| m.name == metric)
                {
                    totals[i].0 += 1;
                    totals[i].1 += value;
                }
                let Some(i) = RANKED.iter().position(|(_, m)| m == metric) else { continue };
                if hour_ms >= day_since_ms {
                    match hours_added[i].iter_mut().find(|(start, ..)| *start == hour_ms) {
                        Some(hour) => (hour.1, hour.2) = (hour.1 + 1, hour.2 + value),
                        None => hours_added[i].push((hour_ms, 1, *value)),
                    }
                }
                if sample.at_ms >= raw_since_ms {
                    let at = raw[i].partition_point(|(at, _)| *at < sample.at_ms);
                    raw[i].insert(at, (sample.at_ms, *value));
                }
            }
        }
        let mut hours = self.hours.clone();
        for (hours, added) in hours.iter_mut().zip(hours_added) {
            for (start_ms, count, sum) in added {
                match hours.binary_search_by_key(&start_ms, |(start, ..)| *start) {
                    Ok(at) => (hours[at].1, hours[at].2) = (hours[at].1 + count, hours[at].2 + sum),
                    Err(at) => hours.insert(at, (start_ms, count, sum)),
                }
            }
        }
        Some(DeviceView { experience: Arc::new(device), hour_ms: self.hour_ms, totals, hours, raw })
    }
}

/// The views this server keeps, by agent.
#[derive(Debug, Default)]
pub(crate) struct ExperienceViews(RwLock<HashMap<String, Arc<DeviceView>>>);

impl ExperienceViews {
    fn get(&self, agent_id: &str) -> Option<Arc<DeviceView>> {
        self.0.read().ok()?.get(agent_id).cloned()
    }

    /// Keeps `view` unless the one kept is newer: a later revision made no earlier (a read
    /// that made it while a report's view was being carried forward).
    fn keep(&self, view: Arc<DeviceView>) {
        if let Ok(mut views) = self.0.write() {
            let newer =
                |kept: &DeviceView| kept.experience.revision > view.experience.revision && kept.hour_ms >= view.hour_ms;
            if views.get(&view.experience.agent_id).is_none_or(|kept| !newer(kept)) {
                views.insert(view.experience.agent_id.clone(), view);
            }
        }
    }

    /// Keeps only the views of `agent_ids` (a device gone from the store goes from here).
    fn retain(&self, agent_ids: &std::collections::HashSet<&str>) {
        if let Ok(mut views) = self.0.write() {
            views.retain(|agent, _| agent_ids.contains(agent.as_str()));
        }
    }
}

/// Makes the views of `agent_ids` that `reach` covers from the store's rows as of `now_ms`.
async fn make_views(
    store: &dyn ExperienceStore,
    reach: &Reach,
    agent_ids: &[String],
    now_ms: i64,
) -> Result<Vec<Arc<DeviceView>>, StoreError> {
    let hourly: Vec<&str> = METRICS.iter().map(|m| m.name).collect();
    let ranked: Vec<&str> = RANKED.iter().map(|(_, m)| *m).collect();
    let wanted = RecentWanted {
        hourly: &hourly,
        hours_since_ms: day_since(now_ms),
        raw: &ranked,
        raw_since_ms: now_ms - VIEW_RAW_MS,
    };
    let mut made = Vec::with_capacity(agent_ids.len());
    for chunk in agent_ids.chunks(MADE_AT_ONCE) {
        for rows in store.recent_rows(reach, chunk, wanted).await? {
            made.push(Arc::new(DeviceView::made(rows, now_ms)));
        }
    }
    Ok(made)
}

impl Hub {
    /// The current view of every device `reach` covers that reported, in agent order: kept
    /// ones that are current, the others made now from the store (and kept).
    pub async fn recent_experience(&self, reach: &Reach) -> Result<Vec<Arc<DeviceView>>, StoreError> {
        let Some(store) = &self.experience else { return Ok(Vec::new()) };
        let now = self.clock().now_ms();
        let revisions = store.experience_revisions(reach).await?;
        let mut views: Vec<Option<Arc<DeviceView>>> = Vec::with_capacity(revisions.len());
        let mut stale = Vec::new();
        for (agent_id, revision) in &revisions {
            let kept = self.views.get(agent_id).filter(|v| v.current(*revision, now));
            if kept.is_none() {
                stale.push(agent_id.clone());
            }
            views.push(kept);
        }
        let mut made: HashMap<String, Arc<DeviceView>> = HashMap::new();
        for view in make_views(store.as_ref(), reach, &stale, now).await? {
            self.views.keep(view.clone());
            made.insert(view.experience.agent_id.clone(), view);
        }
        Ok(revisions
            .iter()
            .zip(views)
            .filter_map(|((agent_id, _), kept)| kept.or_else(|| made.remove(agent_id)))
            .collect())
    }

    /// Brings a device's view up to date after `report` was `saved`: carried forward by the
    /// report's values when it can be, made again from the store otherwise.
    pub(crate) async fn view_after_report(
        &self,
        agent_id: &str,
        report: &ExperienceReport,
        saved: Saved,
    ) -> Result<(), StoreError> {
        let Some(device) = saved.device else { return Ok(()) };
        let values: usize = report.samples.iter().map(|s| s.values.len()).sum();
        let carried = (saved.added == values as u64)
            .then(|| self.views.get(agent_id))
            .flatten()
            .and_then(|kept| kept.carried(device, &report.samples, self.clock().now_ms()));
        match carried {
            Some(view) => {
                self.views.keep(Arc::new(view));
                Ok(())
            }
            None => self.refresh_view(agent_id).await,
        }
    }

    /// Makes one device's view again from the store.
    async fn refresh_view(&self, agent_id: &str) -> Result<(), StoreError> {
        let Some(store) = &self.experience else { return Ok(()) };
        let now = self.clock().now_ms();
        for view in make_views(store.as_ref(), &Reach::Fleet, &[agent_id.to_string()], now).await? {
            self.views.keep(view);
        }
        Ok(())
    }

    /// Makes every device's view again, and forgets the views of devices the store no longer
    /// has: the server runs it as each hour begins (the day window moves), so that reads do
    /// not. How many views it made.
    pub async fn refresh_experience_views(&self) -> Result<usize, StoreError> {
        let Some(store) = &self.experience else { return Ok(0) };
        let revisions = store.experience_revisions(&Reach::Fleet).await?;
        self.views.retain(&revisions.iter().map(|(agent, _)| agent.as_str()).collect());
        let agents: Vec<String> = revisions.into_iter().map(|(agent, _)| agent).collect();
        let now = self.clock().now_ms();
        let made = make_views(store.as_ref(), &Reach::Fleet, &agents, now).await?;
        let count = made.len();
        for view in made {
            self.views.keep(view);
        }
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use toolgate_domain::Clock;
    use toolgate_domain::fleet::experience::{ExperienceReport, Measured, Sample};
    use toolgate_store::SqliteStore;

    use super::*;
    use crate::FleetSettings;

    const HOUR_START: i64 = 1_800_000_000_000 - 1_800_000_000_000 % HOUR_MS;
    const CPU: &str = "cpu_busy_pct";

    fn report(samples: &[(i64, f64)]) -> ExperienceReport {
        let samples = samples
            .iter()
            .map(|(at_ms, value)| Sample {
                at_ms: *at_ms,
                values: BTreeMap::from([(CPU.to_string(), *value)]),
                ..Sample::default()
            })
            .collect();
        ExperienceReport { measured: Measured::Host, absent: BTreeMap::new(), samples }
    }

    #[tokio::test]
    async fn a_view_is_what_the_store_holds_and_is_made_again_when_that_changes() {
        let now = HOUR_START + 30 * 60_000;
        let clock = Clock::stopped_at(now);
        let repositories = SqliteStore::open_in_memory().unwrap().repositories();
        let experience = repositories.experience.clone();
        let hub = Hub::load(repositories.fleet, repositories.work, clock.clone(), FleetSettings::default())
            .await
            .unwrap()
            .with_experience(experience.clone(), Vec::new());
        let sent = report(&[(now - 20 * 60_000, 90.0), (now - 60_000, 10.0), (now, 30.0)]);
        hub.take_experience("a", sent.clone()).await.unwrap();
        let views = hub.recent_experience(&Reach::Fleet).await.unwrap();
        assert_eq!(views.len(), 1);
        let view = &views[0];
        assert_eq!(view.day_average(CPU), Some(130.0 / 3.0));
        assert_eq!(view.day_hours(CPU).collect::<Vec<_>>(), [(HOUR_START, 130.0 / 3.0)]);
        assert_eq!(view.raw_since(CPU, now - VIEW_RAW_MS), [(now - 60_000, 10.0), (now, 30.0)], "15 minutes, not 20");
        assert_eq!(view.day_average("mem_used_pct"), None);
        let cpu_at = METRICS.iter().position(|m| m.name == CPU).unwrap();
        let averages: Vec<Option<f64>> = view.day_averages().collect();
        assert_eq!((averages.len(), averages[cpu_at]), (METRICS.len(), Some(130.0 / 3.0)));
        assert_eq!(averages.iter().flatten().count(), 1);
        // Sent again (its answer lost): nothing new, the same view.
        hub.take_experience("a", sent).await.unwrap();
        assert!(Arc::ptr_eq(&hub.recent_experience(&Reach::Fleet).await.unwrap()[0], view));

        // Another replica took a report: the revision moved, the view is made again.
        experience.save_experience("a", &report(&[(now + 1_000, 50.0)]), now).await.unwrap();
        let remade = hub.recent_experience(&Reach::Fleet).await.unwrap();
        assert_eq!(remade[0].day_average(CPU), Some(45.0));
        assert_eq!(remade[0].experience.revision, 2);

        // The next hour: the day window still holds this one; a day later it has moved past.
        clock.advance_ms(HOUR_MS);
        let next_hour = hub.recent_experience(&Reach::Fleet).await.unwrap();
        assert!(!Arc::ptr_eq(&next_hour[0], &remade[0]), "made in another hour");
        assert_eq!(next_hour[0].day_average(CPU), Some(45.0));
        assert!(next_hour[0].raw_since(CPU, now + HOUR_MS - VIEW_RAW_MS).is_empty());
        clock.advance_ms(VIEW_HOURS * HOUR_MS);
        assert_eq!(hub.refresh_experience_views().await.unwrap(), 1);
        let a_day_on = hub.recent_experience(&Reach::Fleet).await.unwrap();
        assert_eq!((a_day_on[0].day_average(CPU), a_day_on[0].day_hours(CPU).count()), (None, 0));
    }

    #[tokio::test]
    async fn a_view_carried_forward_by_a_report_is_the_view_the_store_would_make() {
        let now = HOUR_START + 40 * 60_000;
        let store = SqliteStore::open_in_memory().unwrap().repositories().experience;
        let made_now = |at_ms| {
            let store = store.clone();
            async move { make_views(store.as_ref(), &Reach::Fleet, &["a".to_string()], at_ms).await.unwrap().remove(0) }
        };
        let first = report(&[(HOUR_START - 2 * HOUR_MS, 70.0), (now - 20 * 60_000, 90.0), (now - 60_000, 10.0)]);
        store.save_experience("a", &first, now).await.unwrap();
        let before = made_now(now).await;
        // Two values in the hour, one in an hour the view had, one in an hour it had not, one
        // before the raw window, one past the day window, and a metric that is not ranked.
        let mut next = report(&[
            (now + 30_000, 20.0),
            (now + 50_000, 40.0),
            (HOUR_START - 2 * HOUR_MS + 1, 80.0),
            (HOUR_START - 3 * HOUR_MS, 60.0),
            (now - 16 * 60_000, 50.0),
            (HOUR_START - VIEW_HOURS * HOUR_MS, 99.0),
        ]);
        next.samples[0].values.insert("mem_used_pct".into(), 55.0);
        let later = now + 60_000;
        let saved = store.keep_experience("a", &next, later).await.unwrap();
        let device = saved.device.clone().unwrap();
        let carried = before.carried(device.clone(), &next.samples, later).expect("the next revision, the same hour");
        let made = made_now(later).await;
        assert_eq!((&carried.experience, carried.hour_ms), (&made.experience, made.hour_ms));
        assert_eq!((&carried.hours, &carried.raw), (&made.hours, &made.raw));
        for ((count, sum), (made_count, made_sum)) in carried.totals.iter().zip(&made.totals) {
            assert_eq!(count, made_count);
            assert!((sum - made_sum).abs() < 1e-9, "{sum} against {made_sum}");
        }
        assert_eq!(carried.day_average("mem_used_pct"), Some(55.0));

        // Not carried: a revision in between, or the next hour.
        assert!(before.carried(DeviceExperience { revision: 3, ..device.clone() }, &next.samples, later).is_none());
        assert!(before.carried(device, &next.samples, HOUR_START + HOUR_MS).is_none());
    }

    #[test]
    fn the_day_window_is_the_current_hour_and_the_23_before() {
        assert_eq!(day_since(HOUR_START + 59 * 60_000), HOUR_START - 23 * HOUR_MS);
        assert_eq!(day_since(HOUR_START), HOUR_START - 23 * HOUR_MS);
    }
}

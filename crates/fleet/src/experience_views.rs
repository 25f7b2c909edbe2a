//! Recent views of devices' experience (docs/experience.md, "At scale"). At 10,000 devices the
//! default fleet reads (the 24-hour window of every metric, the last 15 minutes of a ranked
//! one) would aggregate millions of store rows per call. Instead the server keeps, per device,
//! what those reads need: each metric's count and sum over the window's hours, the hourly
//! averages and the raw samples of the ranked metrics; about 2 KB a device.
//!
//! A view is what the store would answer. It is made from the store's rows, and carried forward
//! by each report that brings the device something new: by the report's own values when they
//! were all new and the view is at the revision just before the report's (the common case;
//! made again, it read about 700 rows back per report, at 170 reports a second), and made
//! again from the store otherwise. A read makes it again whenever it finds it out of date: made in an earlier hour
//! (the window moved), or at an older revision of the device (another replica took a report).
//! A read therefore answers from views only when they are current, reading the store for those
//! that are not.

use std::collections::{BTreeMap, HashMap};
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
/// Views made from the store, by what made them: `read` (a read found one out of date),
/// `report` (a report's view could not be carried forward) and `hour` (the hourly remaking).
/// Reads should rarely make one: each is about 700 rows.
pub const VIEWS_MADE: &str = "toolgate_experience_views_made_total";
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

/// The views this server keeps, by agent (in bytewise order, so that a read walks them beside
/// the store's list rather than looking each one up).
#[derive(Debug, Default)]
pub(crate) struct ExperienceViews(RwLock<BTreeMap<String, Arc<DeviceView>>>);

impl ExperienceViews {
    fn get(&self, agent_id: &str) -> Option<Arc<DeviceView>> {
        self.0.read().ok()?.get(agent_id).cloned()
    }

    /// The kept view of each of `revisions` (ascending by agent, bytewise) that is current at
    /// `now_ms`, under one lock: 10,000 lookups that each took it and hashed the id cost a
    /// fleet read a tenth of its time.
    fn current_of(&self, revisions: &[(String, i64)], now_ms: i64) -> Vec<Option<Arc<DeviceView>>> {
        let Ok(views) = self.0.read() else { return vec![None; revisions.len()] };
        let current = |view: &Arc<DeviceView>, revision: i64| view.current(revision, now_ms).then(|| view.clone());
        // A few devices among many (a confined caller's) are looked up; most are walked.
        if revisions.len() * 8 < views.len() {
            return revisions.iter().map(|(agent, revision)| current(views.get(agent)?, *revision)).collect();
        }
        let mut kept = views.iter().peekable();
        revisions
            .iter()
            .map(|(agent, revision)| {
                while kept.next_if(|(id, _)| id.as_str() < agent.as_str()).is_some() {}
                let (_, view) = kept.next_if(|(id, _)| *id == agent)?;
                current(view, *revision)
            })
            .collect()
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
    /// The current view of every device `reach` covers that reported, in bytewise agent order:
    /// kept ones that are current, the others made now from the store (and kept).
    pub async fn recent_experience(&self, reach: &Reach) -> Result<Vec<Arc<DeviceView>>, StoreError> {
        let Some(store) = &self.experience else { return Ok(Vec::new()) };
        let now = self.clock().now_ms();
        let mut revisions = store.experience_revisions(reach).await?;
        // Bytewise agent order: SQLite's index gives it (and a sorted list sorts in one pass);
        // PostgreSQL's collation may not.
        revisions.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let views = self.views.current_of(&revisions, now);
        let stale: Vec<String> = revisions
            .iter()
            .zip(&views)
            .filter(|(_, kept)| kept.is_none())
            .map(|((agent, _), _)| agent.clone())
            .collect();
        let mut made: HashMap<String, Arc<DeviceView>> = HashMap::new();
        if !stale.is_empty() {
            metrics::counter!(VIEWS_MADE, "by" => "read").increment(stale.len() as u64);
        }
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
        metrics::counter!(VIEWS_MADE, "by" => "report").increment(1);
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
        metrics::counter!(VIEWS_MADE, "by" => "hour").increment(count as u64);
        for view in made {
            self.views.keep(view);
        }
        Ok(count)
    }
}

#[cfg(test)]
#[path = "experience_views_tests.rs"]
mod tests;

//! The endpoint experience agents measure (docs/experience.md): the store's trait. Samples are
//! kept one row per agent, metric and time, so a batch an agent sends again (its answer was
//! lost) is kept once. Every read is confined to the agents the reader's reach covers, in the
//! query itself.

use std::collections::BTreeMap;

use async_trait::async_trait;
use toolgate_domain::StoreError;
use toolgate_domain::fleet::experience::ExperienceReport;
use toolgate_domain::fleet::parts::Breakdown;
use toolgate_domain::groups::Reach;

pub(crate) type Result<T> = std::result::Result<T, StoreError>;

/// One device's newest experience: what its last report said it measured and could not. (The
/// newest values are not read with it: a fleet read would go through every raw sample; one
/// device's are `recent_values`.)
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceExperience {
    pub agent_id: String,
    /// `host` or `cgroup`.
    pub measured: String,
    /// Each metric it cannot give, and why.
    pub absent: BTreeMap<String, String>,
    pub fullest_filesystem: Option<String>,
    pub last_sample_ms: i64,
    /// How many reports brought it a new value: what it was read at (a view of it made from
    /// older rows is made again).
    pub revision: i64,
}

/// Where averages are read from: raw samples (the last day), or hourly or daily rollups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    Raw,
    Hourly,
    Daily,
}

pub const HOUR_MS: i64 = 3_600_000;
pub const DAY_MS: i64 = 86_400_000;

impl Resolution {
    /// The rollup span it reads (none: raw samples).
    pub(crate) fn span_ms(self) -> Option<i64> {
        match self {
            Resolution::Raw => None,
            Resolution::Hourly => Some(HOUR_MS),
            Resolution::Daily => Some(DAY_MS),
        }
    }
}

/// One device's samples of one metric over a window.
#[derive(Clone, Debug, PartialEq)]
pub struct Averaged {
    pub agent_id: String,
    pub metric: String,
    pub samples: i64,
    pub average: f64,
    pub min: f64,
    pub max: f64,
    /// When the newest of them was taken (raw), or the newest span began (rollups).
    pub last_ms: i64,
}

/// One device's value of a metric: a sample's (raw), or an hour's or a day's average (then
/// `at_ms` is the span's start).
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub agent_id: String,
    pub at_ms: i64,
    pub value: f64,
}

/// How long each resolution is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    pub raw_ms: i64,
    pub hourly_ms: i64,
    pub daily_ms: i64,
}

impl Default for Retention {
    /// Raw for a day, hourly for 30 days, daily for 400 (a year and its season).
    fn default() -> Self {
        Retention { raw_ms: DAY_MS, hourly_ms: 30 * DAY_MS, daily_ms: 400 * DAY_MS }
    }
}

/// What a retention sweep removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExperienceSwept {
    pub raw: u64,
    pub hourly: u64,
    pub daily: u64,
}

/// One rollup row's worth of new samples of what `key` names (a metric, or a program's metric).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Rollup<K> {
    pub key: K,
    pub span_ms: i64,
    pub start_ms: i64,
    pub count: i64,
    pub sum: f64,
    pub min: f64,
    pub max: f64,
}

/// The hourly and daily rollups of samples just kept (never of one kept before: a batch sent
/// again adds nothing).
pub(crate) fn rollups<K: Clone + Ord>(kept: &[(K, i64, f64)]) -> Vec<Rollup<K>> {
    let mut rolled: BTreeMap<(K, i64, i64), Rollup<K>> = BTreeMap::new();
    for (key, at_ms, value) in kept {
        for span_ms in [HOUR_MS, DAY_MS] {
            let start_ms = at_ms - at_ms.rem_euclid(span_ms);
            let entry = rolled.entry((key.clone(), span_ms, start_ms)).or_insert(Rollup {
                key: key.clone(),
                span_ms,
                start_ms,
                count: 0,
                sum: 0.0,
                min: *value,
                max: *value,
            });
            entry.count += 1;
            entry.sum += value;
            entry.min = entry.min.min(*value);
            entry.max = entry.max.max(*value);
        }
    }
    rolled.into_values().collect()
}

/// A retention sweep's delete of `table`'s raw samples taken before `{p}1` or, for a `rollup`
/// table, of its spans of length `{p}1` that began at or before `{p}2` (the cut less the span:
/// a span goes once it has ended), where `p` is the backend's placeholder sign. It goes metric
/// by metric through the table's (metric, time) index: a cut on time alone reads every row
/// (tens of millions at 10,000 devices, every minute, holding SQLite's one connection), and
/// neither backend skips through an index's first column by itself. The metrics are found by
/// walking that index's first column, one step a metric.
pub(crate) fn sweep_statement(table: &str, rollup: bool, p: char) -> String {
    let older = match rollup {
        true => format!("span_ms = {p}1 AND start_ms <= {p}2"),
        false => format!("at_ms < {p}1"),
    };
    format!(
        "WITH RECURSIVE metrics(name) AS (
             SELECT MIN(metric) FROM {table}
             UNION ALL SELECT (SELECT MIN(metric) FROM {table} WHERE metric > metrics.name) FROM metrics
             WHERE metrics.name IS NOT NULL)
         DELETE FROM {table} WHERE metric IN (SELECT name FROM metrics WHERE name IS NOT NULL) AND {older}"
    )
}

/// One part's value on one device (a program's count, an interface's rate): of a sample (raw),
/// or summed over an hour or a day (then `at_ms` is the span's start, and `samples` how many
/// it sums: an average rate is `value / samples`).
#[derive(Clone, Debug, PartialEq)]
pub struct PartValue {
    pub agent_id: String,
    pub part: String,
    pub at_ms: i64,
    pub value: f64,
    pub samples: i64,
}

/// The tables a breakdown's series is kept in, and the column naming the part: (samples,
/// rollups, column).
pub(crate) fn part_tables(breakdown: Breakdown) -> (&'static str, &'static str, &'static str) {
    match breakdown {
        Breakdown::Apps => ("experience_app_sample", "experience_app_rollup", "app"),
        Breakdown::Interfaces => ("experience_interface_sample", "experience_interface_rollup", "interface"),
    }
}

/// A report's values of one breakdown, one row each: (part, metric, at_ms, value).
pub(crate) fn part_rows(breakdown: Breakdown, report: &ExperienceReport) -> Vec<(String, String, i64, f64)> {
    let mut rows = Vec::new();
    for sample in &report.samples {
        for (part, values) in breakdown.of(sample) {
            for (metric, value) in values {
                rows.push((part.clone(), metric.clone(), sample.at_ms, *value));
            }
        }
    }
    rows
}

/// A program's package on one device: from the first to the last sample that named it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackageSpan {
    pub agent_id: String,
    pub program: String,
    pub package: String,
    pub version: String,
    pub first_ms: i64,
    pub last_ms: i64,
}

/// A report's package spans, one per program and package version: (program, package,
/// version, first, last).
pub(crate) fn package_spans(report: &ExperienceReport) -> Vec<(String, String, String, i64, i64)> {
    let mut spans: BTreeMap<(&str, &str, &str), (i64, i64)> = BTreeMap::new();
    for sample in &report.samples {
        for (program, owner) in &sample.packages {
            let span = spans.entry((program, &owner.package, &owner.version)).or_insert((sample.at_ms, sample.at_ms));
            span.0 = span.0.min(sample.at_ms);
            span.1 = span.1.max(sample.at_ms);
        }
    }
    spans.into_iter().map(|((p, k, v), (first, last))| (p.into(), k.into(), v.into(), first, last)).collect()
}

/// The rows a server's recent view of a device is made of (docs/experience.md, "At scale"):
/// which metrics' hourly rollups and raw samples, and from when.
#[derive(Clone, Copy, Debug)]
pub struct RecentWanted<'a> {
    pub hourly: &'a [&'a str],
    pub hours_since_ms: i64,
    pub raw: &'a [&'a str],
    pub raw_since_ms: i64,
}

/// One device's newest experience and the rows [`RecentWanted`] named, read together.
#[derive(Clone, Debug, PartialEq)]
pub struct RecentRows {
    pub device: DeviceExperience,
    /// (metric, start_ms, count, sum) of each hourly rollup, in metric then time order.
    pub hours: Vec<(String, i64, i64, f64)>,
    /// (metric, at_ms, value) of each raw sample, in metric then time order.
    pub raw: Vec<(String, i64, f64)>,
}

/// What keeping a report did: how many of its values were new, and when any was, the
/// device's row as that report left it (its revision moved on by one), so that a server can
/// carry a view of the device made at the revision before forward by the report's values
/// rather than read the rows back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Saved {
    pub added: u64,
    pub device: Option<DeviceExperience>,
}

/// What a device's newest samples say of one signal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Observed {
    /// It holds over its window: from the first of its samples to the newest, with the
    /// furthest value past the threshold (the greatest when `rising`, else the least).
    Holding { started_ms: i64, last_ms: i64, peak: f64, rising: bool },
    /// The newest sample does not meet it.
    Ended { at_ms: i64 },
}

/// One occurrence of a signal on one device.
#[derive(Clone, Debug, PartialEq)]
pub struct Occurrence {
    pub agent_id: String,
    pub signal: String,
    pub started_ms: i64,
    pub last_ms: i64,
    pub ended_ms: Option<i64>,
    pub peak: f64,
}

#[async_trait]
pub trait ExperienceStore: Send + Sync {
    /// Keeps a report's samples (one already kept is kept once) and what it says of its
    /// device; what that did.
    async fn keep_experience(&self, agent_id: &str, report: &ExperienceReport, received_at_ms: i64) -> Result<Saved>;
    /// [`Self::keep_experience`]: how many values were new.
    async fn save_experience(&self, agent_id: &str, report: &ExperienceReport, received_at_ms: i64) -> Result<u64> {
        Ok(self.keep_experience(agent_id, report, received_at_ms).await?.added)
    }
    /// The newest experience of every device `reach` covers (or of `agent_id` alone), in
    /// agent order.
    async fn device_experience(&self, reach: &Reach, agent_id: Option<&str>) -> Result<Vec<DeviceExperience>>;
    /// Each device's revision, of those `reach` covers that reported, in agent order: what
    /// tells a server that its view of a device is out of date.
    async fn experience_revisions(&self, reach: &Reach) -> Result<Vec<(String, i64)>>;
    /// For each of `agent_ids` that `reach` covers and that reported (others are left out):
    /// its newest experience and the rows `wanted` names, the device read first.
    async fn recent_rows(
        &self,
        reach: &Reach,
        agent_ids: &[String],
        wanted: RecentWanted<'_>,
    ) -> Result<Vec<RecentRows>>;
    /// Per device `reach` covers and each of `metrics`: its samples since `since_ms`, read at
    /// `resolution`, in agent then metric order. The metrics are named, not left open, so that
    /// the read goes through an index (each device's primary key in SQLite, the (metric, time)
    /// index in PostgreSQL) rather than every row.
    async fn averages(
        &self,
        reach: &Reach,
        metrics: &[&str],
        since_ms: i64,
        resolution: Resolution,
    ) -> Result<Vec<Averaged>>;
    /// Every value of `metric` since `since_ms` of the devices `reach` covers, read at
    /// `resolution` (hours and days give their averages), in agent and time order.
    async fn series(&self, reach: &Reach, metric: &str, since_ms: i64, resolution: Resolution) -> Result<Vec<Point>>;
    /// One device's newest values of each metric `wanted` names, as many as it says, newest
    /// first: one answer per entry, in its order (one store call for all of a report's signals).
    async fn recent_values(&self, agent_id: &str, wanted: &[(&str, usize)]) -> Result<Vec<Vec<(i64, f64)>>>;
    /// Records what the newest samples say of each signal named: an occurrence opened or
    /// carried on while it holds, the open one ended when it stops; all in one transaction.
    async fn observe(&self, agent_id: &str, observed: &[(&str, Observed)]) -> Result<()>;
    /// The occurrences on devices `reach` covers that held at or after `since_ms` (of
    /// `signal` alone, when given), newest first.
    async fn occurrences(&self, reach: &Reach, since_ms: i64, signal: Option<&str>) -> Result<Vec<Occurrence>>;
    /// Per device `reach` covers and part of `breakdown`: its `metric` (one of the
    /// breakdown's) since `since_ms`, each sample's (raw) or summed per hour or day, in agent,
    /// part and time order.
    async fn part_values(
        &self,
        breakdown: Breakdown,
        reach: &Reach,
        metric: &str,
        since_ms: i64,
        resolution: Resolution,
    ) -> Result<Vec<PartValue>>;
    /// The packages of the programs on devices `reach` covers, as samples named them at or
    /// after `since_ms`, in agent, program and time order.
    async fn package_spans(&self, reach: &Reach, since_ms: i64) -> Result<Vec<PackageSpan>>;
    /// Deletes what is older than `retention` allows at `now_ms`.
    async fn sweep_experience(&self, now_ms: i64, retention: Retention) -> Result<ExperienceSwept>;
}

/// `measured` as stored.
pub(crate) fn measured_name(report: &ExperienceReport) -> &'static str {
    match report.measured {
        toolgate_domain::fleet::experience::Measured::Host => "host",
        toolgate_domain::fleet::experience::Measured::Cgroup => "cgroup",
    }
}

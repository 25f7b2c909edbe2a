//! What the app tools read (docs/experience.md, "Programs"): each program's per-program series
//! on the devices the caller sees, told apart by the version of the package that owns it. The
//! per-program series and the package spans are both read through the caller's reach in the
//! store query.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{Value, json};
use toolgate_domain::ToolError;
use toolgate_domain::fleet::parts::Breakdown;
use toolgate_policy::did_you_mean;
use toolgate_store::{PackageSpan, Resolution};

use super::spread::rounded;
use crate::services::ToolContext;

/// The per-program metrics the app tools read.
const READ: [&str; 5] = ["cpu_seconds", "rss_bytes", "starts", "crashes", "oom_kills"];

/// What a program cost over some samples: CPU time, starts, crashes and OOM kills summed,
/// resident memory averaged over the samples that measured it.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Cost {
    pub cpu_seconds: f64,
    /// Samples that measured its CPU time.
    pub samples: i64,
    rss_sum: f64,
    rss_samples: i64,
    pub starts: f64,
    pub crashes: f64,
    pub oom_kills: f64,
}

impl Cost {
    fn add(&mut self, metric: &str, sum: f64, samples: i64) {
        match metric {
            "cpu_seconds" => (self.cpu_seconds, self.samples) = (self.cpu_seconds + sum, self.samples + samples),
            "rss_bytes" => (self.rss_sum, self.rss_samples) = (self.rss_sum + sum, self.rss_samples + samples),
            "starts" => self.starts += sum,
            "crashes" => self.crashes += sum,
            _ => self.oom_kills += sum,
        }
    }

    pub fn plus(mut self, other: &Cost) -> Cost {
        self.cpu_seconds += other.cpu_seconds;
        self.samples += other.samples;
        self.rss_sum += other.rss_sum;
        self.rss_samples += other.rss_samples;
        self.starts += other.starts;
        self.crashes += other.crashes;
        self.oom_kills += other.oom_kills;
        self
    }

    /// Its average resident memory, when a sample measured it.
    pub fn rss_bytes(&self) -> Option<f64> {
        (self.rss_samples > 0).then(|| self.rss_sum / self.rss_samples as f64)
    }

    /// CPU seconds per sample interval, when a sample measured it.
    pub fn cpu_per_sample(&self) -> Option<f64> {
        (self.samples > 0).then(|| self.cpu_seconds / self.samples as f64)
    }

    /// The figures the tools show, rounded.
    pub fn shown(&self) -> Value {
        json!({
            "cpu_seconds": rounded(self.cpu_seconds),
            "rss_bytes_avg": self.rss_bytes().map(f64::round),
            "starts": self.starts, "crashes": self.crashes, "oom_kills": self.oom_kills,
        })
    }
}

/// A package version, or why there is none.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Owner {
    Package {
        package: String,
        version: String,
    },
    /// No sample named a package: none owns the executable, or the agent could not read it.
    Unknown,
    /// Samples of more than one version fell in the span (an hour or day of an upgrade).
    Upgrading,
}

impl Owner {
    pub fn version(&self) -> Option<&str> {
        match self {
            Owner::Package { version, .. } => Some(version),
            _ => None,
        }
    }

    pub fn shown(&self) -> Value {
        match self {
            Owner::Package { package, version } => json!({"package": package, "version": version}),
            Owner::Unknown => json!({"package": null, "version": null}),
            Owner::Upgrading => json!({"package": null, "version": "(more than one: upgraded in this span)"}),
        }
    }
}

/// One program on one device over one sample, hour or day.
#[derive(Clone, Debug)]
pub(super) struct Observation {
    pub agent_id: String,
    pub program: String,
    pub at_ms: i64,
    pub cost: Cost,
    pub owner: Owner,
}

/// Every program's observations over a window on the devices `keep` allows, with the package
/// spans that told their versions.
pub(super) struct AppUsage {
    pub observations: Vec<Observation>,
    pub spans: Vec<PackageSpan>,
}

impl AppUsage {
    pub async fn read(
        ctx: &ToolContext,
        since_ms: i64,
        resolution: Resolution,
        keep: impl Fn(&str) -> bool,
    ) -> Result<AppUsage, ToolError> {
        let store = &ctx.services().repositories().experience;
        let mut costs: BTreeMap<(String, String, i64), Cost> = BTreeMap::new();
        for metric in READ {
            for v in store.part_values(Breakdown::Apps, ctx.reach(), metric, since_ms, resolution).await? {
                if keep(&v.agent_id) {
                    costs.entry((v.agent_id, v.part, v.at_ms)).or_default().add(metric, v.value, v.samples);
                }
            }
        }
        let mut spans = store.package_spans(ctx.reach(), since_ms).await?;
        spans.retain(|s| keep(&s.agent_id));
        let span_ms = match resolution {
            Resolution::Raw => 0,
            Resolution::Hourly => toolgate_store::HOUR_MS - 1,
            Resolution::Daily => toolgate_store::DAY_MS - 1,
        };
        // Each device's program's spans, found once rather than searched for each observation.
        let mut spans_of: HashMap<(&str, &str), Vec<&PackageSpan>> = HashMap::new();
        for s in &spans {
            spans_of.entry((s.agent_id.as_str(), s.program.as_str())).or_default().push(s);
        }
        let observations = costs
            .into_iter()
            .map(|((agent_id, program, at_ms), cost)| {
                let its = spans_of.get(&(agent_id.as_str(), program.as_str())).map_or(&[][..], Vec::as_slice);
                let mut owners = its.iter().filter(|s| s.first_ms <= at_ms + span_ms && s.last_ms >= at_ms);
                let owner = match (owners.next(), owners.next()) {
                    (None, _) => Owner::Unknown,
                    (Some(s), None) => Owner::Package { package: s.package.clone(), version: s.version.clone() },
                    (Some(_), Some(_)) => Owner::Upgrading,
                };
                Observation { agent_id, program, at_ms, cost, owner }
            })
            .collect();
        Ok(AppUsage { observations, spans })
    }

    /// The programs `app` names: the program of that name, else those its package owns.
    pub fn programs(&self, app: &str) -> Result<BTreeSet<String>, ToolError> {
        let named: BTreeSet<String> =
            self.observations.iter().filter(|o| o.program == app).map(|o| o.program.clone()).collect();
        if !named.is_empty() {
            return Ok(named);
        }
        let owned: BTreeSet<String> =
            self.spans.iter().filter(|s| s.package == app).map(|s| s.program.clone()).collect();
        if !owned.is_empty() {
            return Ok(owned);
        }
        let known: BTreeSet<&str> = self
            .observations
            .iter()
            .map(|o| o.program.as_str())
            .chain(self.spans.iter().map(|s| s.package.as_str()))
            .collect();
        let hint = match known.is_empty() {
            true => "no device you can see reported a program in this window".to_string(),
            false => did_you_mean(app, known.iter().copied()),
        };
        Err(ToolError::NotFound(format!(
            "no program or package `{app}` in this window: {hint} (list_dex_perf_apps lists them)"
        )))
    }
}

/// Each device's cost, summed over `observations`.
pub(super) fn by_device<'a>(observations: impl Iterator<Item = &'a Observation>) -> BTreeMap<&'a str, Cost> {
    let mut devices: BTreeMap<&str, Cost> = BTreeMap::new();
    for o in observations {
        let cost = devices.entry(o.agent_id.as_str()).or_default();
        *cost = cost.plus(&o.cost);
    }
    devices
}

/// What `observations` cost in all, and on how many devices.
pub(super) fn totals<'a>(observations: impl Iterator<Item = &'a Observation>) -> Value {
    let devices = by_device(observations);
    let all = devices.values().fold(Cost::default(), |sum, c| sum.plus(c));
    let mut shown = all.shown();
    shown["devices"] = json!(devices.len());
    shown["cpu_seconds_per_device"] = json!(rounded(all.cpu_seconds / devices.len().max(1) as f64));
    shown
}

/// Each package version of `observations` (upgrade spans and unknown owners included) and what
/// it cost, the most costly first.
pub(super) fn by_version<'a>(observations: impl Iterator<Item = &'a Observation> + Clone) -> Vec<Value> {
    let owners: BTreeSet<&Owner> = observations.clone().map(|o| &o.owner).collect();
    let mut versions: Vec<Value> = owners
        .into_iter()
        .map(|owner| {
            let mut shown = totals(observations.clone().filter(|o| &o.owner == owner));
            for (k, v) in owner.shown().as_object().into_iter().flatten() {
                shown[k] = v.clone();
            }
            shown
        })
        .collect();
    versions
        .sort_by(|a, b| b["cpu_seconds"].as_f64().unwrap_or(0.0).total_cmp(&a["cpu_seconds"].as_f64().unwrap_or(0.0)));
    versions
}

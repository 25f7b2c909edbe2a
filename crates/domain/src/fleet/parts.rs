//! A device's experience broken down by its parts (docs/experience.md): per program, the
//! process exits it counted; per network interface, its traffic. Each breakdown is a field of
//! every sample, declared here once: the agent fills it, the server keeps it as a series of its
//! own, and a signal on a metric a breakdown `explains` names the parts behind it.

use std::collections::BTreeMap;

use serde::Serialize;
use toolgate_policy::did_you_mean;

use super::experience::Sample;

/// One value kept per part on every sample that names the part.
#[derive(Debug, Serialize)]
pub struct PartMetric {
    pub name: &'static str,
    pub description: &'static str,
    /// The device metric it breaks down, when there is one: a signal on that metric names the
    /// parts behind each occurrence.
    pub explains: Option<&'static str>,
}

const fn part_metric(name: &'static str, description: &'static str, explains: Option<&'static str>) -> PartMetric {
    PartMetric { name, description, explains }
}

pub const APP_METRICS: &[PartMetric] = &[
    part_metric(
        "cpu_seconds",
        "CPU time its processes used since the last sample (user and system, summed over its processes).",
        None,
    ),
    part_metric("rss_bytes", "Resident memory of its processes at the sample, summed.", None),
    part_metric("starts", "Processes of the program that started since the last sample.", None),
    part_metric("exits", "Processes of the program that ended, however they ended.", None),
    part_metric(
        "crashes",
        "Those that died of a signal other than one asking a program to stop (HUP, INT, PIPE, TERM), or dumped core.",
        Some("app_crashes"),
    ),
    part_metric(
        "oom_kills",
        "Those the kernel killed for want of memory (named by the kernel log where the agent may read it).",
        Some("oom_kills"),
    ),
];

pub const INTERFACE_METRICS: &[PartMetric] = &[
    part_metric("rx_bytes_per_s", "Bytes received.", Some("net_rx_bytes_per_s")),
    part_metric("tx_bytes_per_s", "Bytes sent.", Some("net_tx_bytes_per_s")),
    part_metric("errors_per_s", "Receive and transmit errors.", Some("net_errors_per_s")),
    part_metric("drops_per_s", "Packets dropped.", Some("net_drops_per_s")),
];

/// How many of the busiest, and of the largest, programs each sample names, beside those whose
/// processes ended: what bounds the per-program series whatever a host runs.
pub const TOP_PROGRAMS: usize = 8;
/// What the app tools say of the programs they show.
pub const TOP_PROGRAMS_NOTE: &str = "Each sample names the 8 programs that used the most CPU and the 8 largest in memory, and every program whose processes ended; a program outside those in a sample is not counted in it. The kernel's own threads are not programs.";
/// The device metric process exits give: absent, with the reason, where they are unseen.
pub const EXITS_METRIC: &str = "app_crashes";

/// The most parts one sample names in a breakdown; the rest are counted under
/// [`Breakdown::other`].
pub const MAX_PARTS_PER_SAMPLE: usize = 64;
/// The longest part name a sample may hold (the kernel's process and interface names are 15
/// bytes).
pub const MAX_PART_NAME_BYTES: usize = 64;

/// What a device's experience is broken down by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Breakdown {
    /// Programs (process names): the busiest and the largest from the process table, and every
    /// one process exits named.
    Apps,
    /// Network interfaces but loopback, from /proc/net/dev.
    Interfaces,
}

impl Breakdown {
    pub const ALL: [Breakdown; 2] = [Breakdown::Apps, Breakdown::Interfaces];

    /// Its field in a sample, and its name in tool answers.
    pub fn field(self) -> &'static str {
        match self {
            Breakdown::Apps => "apps",
            Breakdown::Interfaces => "interfaces",
        }
    }

    /// What one part is called in prose.
    pub fn part(self) -> &'static str {
        match self {
            Breakdown::Apps => "program",
            Breakdown::Interfaces => "interface",
        }
    }

    pub fn metrics(self) -> &'static [PartMetric] {
        match self {
            Breakdown::Apps => APP_METRICS,
            Breakdown::Interfaces => INTERFACE_METRICS,
        }
    }

    /// Where a sample counts the parts past [`MAX_PARTS_PER_SAMPLE`].
    pub fn other(self) -> &'static str {
        match self {
            Breakdown::Apps => "(other programs)",
            Breakdown::Interfaces => "(other interfaces)",
        }
    }

    pub fn of(self, sample: &Sample) -> &BTreeMap<String, BTreeMap<String, f64>> {
        match self {
            Breakdown::Apps => &sample.apps,
            Breakdown::Interfaces => &sample.interfaces,
        }
    }

    /// The breakdown and part metric that explain the device metric `metric`, if any.
    pub fn explaining(metric: &str) -> Option<(Breakdown, &'static PartMetric)> {
        Breakdown::ALL.into_iter().find_map(|b| b.metrics().iter().find(|m| m.explains == Some(metric)).map(|m| (b, m)))
    }

    /// What the server checks of a sample's breakdown: bounded, named parts, declared metrics,
    /// finite values that are not negative.
    pub fn check(self, sample: &Sample) -> Result<(), String> {
        let parts = self.of(sample);
        if parts.len() > MAX_PARTS_PER_SAMPLE + 1 {
            return Err(format!(
                "a sample at {} names {} {}s, more than the {MAX_PARTS_PER_SAMPLE} (and `{}`) it may",
                sample.at_ms,
                parts.len(),
                self.part(),
                self.other()
            ));
        }
        for (part, values) in parts {
            if part.is_empty() || part.len() > MAX_PART_NAME_BYTES {
                return Err(format!(
                    "a sample at {} names a{} {} of {} bytes (1 to {MAX_PART_NAME_BYTES})",
                    sample.at_ms,
                    if self == Breakdown::Interfaces { "n" } else { "" },
                    self.part(),
                    part.len()
                ));
            }
            for (name, value) in values {
                if !self.metrics().iter().any(|m| m.name == name) {
                    let known = did_you_mean(name, self.metrics().iter().map(|m| m.name));
                    return Err(format!("no per-{} experience metric `{name}`: {known}", self.part()));
                }
                if !value.is_finite() || *value < 0.0 {
                    return Err(format!("`{name}` of `{part}` at {} is {value}, not a count or a rate", sample.at_ms));
                }
            }
        }
        Ok(())
    }
}

/// docs/experience.md's table of per-part metrics, generated from the breakdowns.
pub fn parts_markdown() -> String {
    let mut out = String::from("| per | metric | meaning | breaks down |\n|---|---|---|---|\n");
    for breakdown in Breakdown::ALL {
        for m in breakdown.metrics() {
            let explains = m.explains.map_or("—".to_string(), |device| format!("`{device}`"));
            out.push_str(&format!("| {} | `{}` | {} | {explains} |\n", breakdown.part(), m.name, m.description));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(breakdown: Breakdown, part: &str, name: &str, value: f64) -> Result<(), String> {
        let mut sample = Sample {
            at_ms: 1,
            values: BTreeMap::new(),
            fullest_filesystem: None,
            apps: BTreeMap::new(),
            interfaces: BTreeMap::new(),
            packages: BTreeMap::new(),
        };
        let values = BTreeMap::from([(name.to_string(), value)]);
        match breakdown {
            Breakdown::Apps => sample.apps.insert(part.into(), values),
            Breakdown::Interfaces => sample.interfaces.insert(part.into(), values),
        };
        breakdown.check(&sample)
    }

    #[test]
    fn the_note_says_how_many_programs_a_sample_names() {
        assert!(TOP_PROGRAMS_NOTE.contains(&format!("the {TOP_PROGRAMS} programs")));
    }

    #[test]
    fn a_breakdown_names_its_parts_with_declared_metrics() {
        assert!(checked(Breakdown::Apps, "flaky", "crashes", 1.0).is_ok());
        assert!(checked(Breakdown::Apps, "flaky", "crashs", 1.0).unwrap_err().contains("`crashes`"));
        assert!(checked(Breakdown::Apps, "flaky", "exits", -1.0).unwrap_err().contains("not a count"));
        assert!(checked(Breakdown::Apps, "", "exits", 1.0).unwrap_err().contains("a program of 0 bytes"));
        assert!(checked(Breakdown::Interfaces, "eth0", "rx_bytes_per_s", 1e6).is_ok());
        let wrong = checked(Breakdown::Interfaces, "eth0", "crashes", 1.0).unwrap_err();
        assert!(wrong.contains("per-interface") && wrong.contains("`errors_per_s`"), "{wrong}");
        assert_eq!(Breakdown::explaining("app_crashes").map(|(b, m)| (b, m.name)), Some((Breakdown::Apps, "crashes")));
        assert_eq!(
            Breakdown::explaining("net_errors_per_s").map(|(b, m)| (b, m.name)),
            Some((Breakdown::Interfaces, "errors_per_s"))
        );
        assert!(Breakdown::explaining("cpu_busy_pct").is_none());
    }

    #[test]
    fn what_a_breakdown_explains_is_a_declared_device_metric() {
        for breakdown in Breakdown::ALL {
            for m in breakdown.metrics() {
                if let Some(device) = m.explains {
                    assert!(super::super::experience::metric_named(device).is_ok(), "{}: {device}", m.name);
                }
            }
        }
    }
}

//! The endpoint experience an agent measures (docs/experience.md), declared once: the agent's
//! sampler takes exactly these metrics, the server keeps their history, and experience.yaml's
//! signals may name exactly these. Nothing is invented: a metric the host cannot give is absent
//! from the report, with the reason.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use toolgate_policy::did_you_mean;

use super::parts::Breakdown;

/// One measurement taken on every sample.
#[derive(Debug, Serialize)]
pub struct Metric {
    pub name: &'static str,
    pub unit: &'static str,
    pub description: &'static str,
    /// Where the agent reads it when it measures the whole host.
    pub host_source: &'static str,
    /// Where it reads it when it measures its container (a cgroup), or why it cannot.
    pub cgroup_source: Result<&'static str, &'static str>,
}

const fn metric(
    name: &'static str,
    unit: &'static str,
    description: &'static str,
    host_source: &'static str,
    cgroup_source: Result<&'static str, &'static str>,
) -> Metric {
    Metric { name, unit, description, host_source, cgroup_source }
}

const KERNEL_WIDE: &str = "the kernel keeps it for the whole machine, not per cgroup";

pub const METRICS: &[Metric] = &[
    metric(
        "cpu_busy_pct",
        "%",
        "CPU time spent not idle, over the CPUs the device may use.",
        "/proc/stat",
        Ok("cpu.stat usage_usec (cgroup v2) or cpuacct.usage (v1), over the CPUs allowed"),
    ),
    metric("cpu_steal_pct", "%", "CPU time a hypervisor took from this machine.", "/proc/stat", Err(KERNEL_WIDE)),
    metric("load_1", "tasks", "The one-minute load average.", "/proc/loadavg", Err(KERNEL_WIDE)),
    metric(
        "mem_used_pct",
        "%",
        "Memory in use, against what the device may use.",
        "/proc/meminfo (MemTotal − MemAvailable)",
        Ok(
            "memory.current (v2) or memory.usage_in_bytes (v1) less inactive file pages, against its limit or else the machine's memory",
        ),
    ),
    metric(
        "mem_available_bytes",
        "bytes",
        "Memory that can be given to programs without swapping.",
        "/proc/meminfo MemAvailable",
        Ok("the cgroup's limit less its use, when it has a limit; else the machine's MemAvailable"),
    ),
    metric("commit_bytes", "bytes", "Memory promised to programs (Committed_AS).", "/proc/meminfo", Err(KERNEL_WIDE)),
    metric(
        "cpu_pressure_pct",
        "%",
        "Share of the last 10 s some task waited for a CPU (PSI some avg10).",
        "/proc/pressure/cpu",
        Ok("cpu.pressure (v2)"),
    ),
    metric(
        "mem_pressure_pct",
        "%",
        "Share of the last 10 s some task waited for memory (PSI some avg10).",
        "/proc/pressure/memory",
        Ok("memory.pressure (v2)"),
    ),
    metric(
        "io_pressure_pct",
        "%",
        "Share of the last 10 s some task waited for I/O (PSI some avg10).",
        "/proc/pressure/io",
        Ok("io.pressure (v2)"),
    ),
    metric("swap_in_per_s", "pages/s", "Pages read back from swap.", "/proc/vmstat pswpin", Err(KERNEL_WIDE)),
    metric("swap_out_per_s", "pages/s", "Pages written out to swap.", "/proc/vmstat pswpout", Err(KERNEL_WIDE)),
    metric(
        "oom_kills",
        "kills",
        "Processes the kernel killed for want of memory since the last sample.",
        "/proc/vmstat oom_kill",
        Ok("memory.events oom_kill (v2) or memory.oom_control (v1)"),
    ),
    metric(
        "disk_busy_pct",
        "%",
        "Time the busiest disk was doing I/O.",
        "/proc/diskstats (time spent doing I/Os)",
        Err(KERNEL_WIDE),
    ),
    metric(
        "disk_latency_ms",
        "ms",
        "Average time one disk I/O took, over every disk.",
        "/proc/diskstats (time reading and writing / I/Os completed)",
        Err(KERNEL_WIDE),
    ),
    metric(
        "disk_free_pct",
        "%",
        "Free space on the fullest writable filesystem, on disk or in memory (the sample names it).",
        "statvfs of every writable filesystem in /proc/self/mounts",
        Ok("statvfs of every writable filesystem in the container's own mounts"),
    ),
    metric("net_rx_bytes_per_s", "bytes/s", "Bytes received, over every interface but loopback.", NET_DEV, Ok(NET_NS)),
    metric("net_tx_bytes_per_s", "bytes/s", "Bytes sent, over every interface but loopback.", NET_DEV, Ok(NET_NS)),
    metric("net_errors_per_s", "errors/s", "Receive and transmit errors, over every interface.", NET_DEV, Ok(NET_NS)),
    metric("net_drops_per_s", "packets/s", "Packets dropped, over every interface.", NET_DEV, Ok(NET_NS)),
    metric(
        "tcp_retransmits_per_s",
        "segments/s",
        "TCP segments sent again.",
        "/proc/net/snmp (Tcp RetransSegs)",
        Ok("/proc/net/snmp of the container's network namespace"),
    ),
    metric(
        "heartbeat_rtt_ms",
        "ms",
        "Round trip of a ping to the server over the agent's connection.",
        "a WebSocket ping on the session",
        Ok("a WebSocket ping on the session"),
    ),
    metric(
        "failed_units",
        "units",
        "systemd units in the failed state now.",
        "systemctl list-units --state=failed",
        Ok("the container's own systemd"),
    ),
    metric(
        "app_crashes",
        "processes",
        "Programs that died of a signal or dumped core since the last sample (each sample's `apps` names them).",
        "the kernel's process events (netlink proc connector), as root in the initial PID namespace",
        Ok("the container's process accounting (acct(2), which needs CAP_SYS_PACCT)"),
    ),
    metric(
        "boot_duration_ms",
        "ms",
        "How long the current boot took, by systemd's own timing.",
        "systemd-analyze time, once per boot",
        Ok("the container's own systemd (its userspace start)"),
    ),
];

/// The reference's names of the metrics devices are ranked and cohorts compared by, and the
/// metric each reads.
pub const RANKED: &[(&str, &str)] =
    &[("cpu", "cpu_busy_pct"), ("commit", "commit_bytes"), ("disk_lat", "disk_latency_ms")];

const NET_DEV: &str = "/proc/net/dev";

/// The metrics of a device's network, which the network tools read: its round trip to the
/// server, retransmissions, traffic, errors and drops.
pub const NETWORK_METRICS: &[&str] = &[
    "heartbeat_rtt_ms",
    "tcp_retransmits_per_s",
    "net_rx_bytes_per_s",
    "net_tx_bytes_per_s",
    "net_errors_per_s",
    "net_drops_per_s",
];
const NET_NS: &str = "/proc/net/dev of the container's network namespace";

/// The metric called `name`, or an error naming the closest.
pub fn metric_named(name: &str) -> Result<&'static Metric, String> {
    METRICS
        .iter()
        .find(|m| m.name == name)
        .ok_or_else(|| format!("no experience metric `{name}`: {}", did_you_mean(name, METRICS.iter().map(|m| m.name))))
}

/// docs/experience.md's table of metrics, generated from [`METRICS`].
pub fn metrics_markdown() -> String {
    let mut out = String::from("| metric | unit | meaning | on a host | in a container |\n|---|---|---|---|---|\n");
    for m in METRICS {
        let cgroup = match m.cgroup_source {
            Ok(source) => source.to_string(),
            Err(why) => format!("absent: {why}"),
        };
        out.push_str(&format!("| `{}` | {} | {} | {} | {cgroup} |\n", m.name, m.unit, m.description, m.host_source));
    }
    out
}

/// What a report measured: the whole machine, or the container the agent runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Measured {
    Host,
    Cgroup,
}

/// One sample: every metric the device could give at `at_ms`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sample {
    pub at_ms: i64,
    pub values: BTreeMap<String, f64>,
    /// The mount point `disk_free_pct` is of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fullest_filesystem: Option<String>,
    /// Per program (process name) that did anything counted since the last sample, its counts
    /// ([`super::parts::APP_METRICS`]); programs with nothing to count are left out.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub apps: BTreeMap<String, BTreeMap<String, f64>>,
    /// Per network interface but loopback, its rates ([`super::parts::INTERFACE_METRICS`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub interfaces: BTreeMap<String, BTreeMap<String, f64>>,
    /// Per program in `apps` whose executable a package owns, that package as installed when
    /// the program's process started (protocol 7).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub packages: BTreeMap<String, AppPackage>,
}

/// The package that owns a program's executable, and its version.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppPackage {
    pub package: String,
    pub version: String,
}

/// The longest package name or version a sample may hold (Debian's are far shorter).
pub const MAX_PACKAGE_FIELD_BYTES: usize = 128;

/// A batch of samples, as the agent sends them over a report connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperienceReport {
    pub measured: Measured,
    /// Each metric the device cannot give, and why (as of the newest sample).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub absent: BTreeMap<String, String>,
    pub samples: Vec<Sample>,
}

/// The most samples one report may carry: a day at one a minute, what an agent keeps while the
/// server cannot be reached.
pub const MAX_SAMPLES_PER_REPORT: usize = 1440;

impl ExperienceReport {
    /// What the server checks before it keeps a report: declared metrics, finite values, a
    /// bounded batch.
    pub fn check(&self) -> Result<(), String> {
        if self.samples.len() > MAX_SAMPLES_PER_REPORT {
            return Err(format!(
                "an experience report of {} samples, more than the {MAX_SAMPLES_PER_REPORT} it may hold",
                self.samples.len()
            ));
        }
        for name in self.absent.keys() {
            metric_named(name)?;
        }
        for sample in &self.samples {
            for (name, value) in &sample.values {
                metric_named(name)?;
                if !value.is_finite() {
                    return Err(format!("experience metric `{name}` at {} is {value}, not a number", sample.at_ms));
                }
            }
            for breakdown in Breakdown::ALL {
                breakdown.check(sample)?;
            }
            for (program, owner) in &sample.packages {
                if !sample.apps.contains_key(program) {
                    return Err(format!(
                        "a sample at {} names the package of `{program}`, a program it does not count",
                        sample.at_ms
                    ));
                }
                for field in [&owner.package, &owner.version] {
                    if field.is_empty() || field.len() > MAX_PACKAGE_FIELD_BYTES {
                        return Err(format!(
                            "the package of `{program}` at {} has a name or version of {} bytes (1 to {MAX_PACKAGE_FIELD_BYTES})",
                            sample.at_ms,
                            field.len()
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// How the server wants experience measured (protocol 5 on, in the welcome).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperienceSettings {
    /// How often the agent samples.
    pub sample_interval_ms: u64,
    /// How often it sends what it sampled.
    pub report_interval_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_network_metrics_are_declared() {
        for name in NETWORK_METRICS {
            assert!(metric_named(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn a_report_names_declared_metrics_with_numbers() {
        let sample = |name: &str, value: f64| Sample {
            at_ms: 1,
            values: BTreeMap::from([(name.to_string(), value)]),
            fullest_filesystem: None,
            apps: BTreeMap::new(),
            interfaces: BTreeMap::new(),
            packages: BTreeMap::new(),
        };
        let report = |samples| ExperienceReport { measured: Measured::Host, absent: BTreeMap::new(), samples };
        assert!(report(vec![sample("cpu_busy_pct", 12.5)]).check().is_ok());
        let unknown = report(vec![sample("cpu_bsy_pct", 1.0)]).check().unwrap_err();
        assert!(unknown.contains("did you mean") && unknown.contains("`cpu_busy_pct`"), "{unknown}");
        assert!(report(vec![sample("load_1", f64::NAN)]).check().unwrap_err().contains("not a number"));
        assert!(report(vec![sample("load_1", 1.0); MAX_SAMPLES_PER_REPORT + 1]).check().is_err());
    }
}

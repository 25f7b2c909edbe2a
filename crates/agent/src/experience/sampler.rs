//! One sample of every metric (toolgate_domain::fleet::experience::METRICS), from the whole
//! host or from the container the agent runs in. Counters become rates against the previous
//! reading; a counter that went back (a reboot, a wrap) gives no rate for that sample.

use std::collections::BTreeMap;
use std::path::Path;

use toolgate_domain::fleet::experience::{METRICS, Measured, Sample};

use super::cgroup::Cgroup;
use super::procfs::{self, DiskCounters, NetCounters};

/// The kernel's counters at one instant.
#[derive(Clone, Debug, Default)]
struct Reading {
    at_ms: i64,
    cpu: Option<(u64, u64, u64)>,
    cgroup_cpu_us: Option<u64>,
    vmstat: BTreeMap<String, u64>,
    cgroup_oom_kills: Option<u64>,
    disks: BTreeMap<String, DiskCounters>,
    net: Option<BTreeMap<String, NetCounters>>,
    retransmits: Option<u64>,
}

pub struct Sampler {
    measured: Measured,
    cgroup: Option<Cgroup>,
    /// Why the cgroup could not be found, when it was asked for.
    cgroup_missing: Option<String>,
    /// The CPUs the cgroup may use (its share of the machine's time).
    cpus: f64,
    previous: Reading,
}

/// What one sample could not measure, and why.
pub type Absent = BTreeMap<String, String>;

impl Sampler {
    /// A sampler of the whole host, or of the cgroup `cgroup` locates; it reads the counters
    /// once now, so that its first sample already has rates.
    pub fn new(cgroup: Option<Result<Cgroup, String>>, now_ms: i64) -> Sampler {
        let (measured, cgroup, cgroup_missing) = match cgroup {
            None => (Measured::Host, None, None),
            Some(Ok(found)) => (Measured::Cgroup, Some(found), None),
            Some(Err(why)) => (Measured::Cgroup, None, Some(why)),
        };
        let cpus = std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64);
        let mut sampler = Sampler { measured, cgroup, cgroup_missing, cpus, previous: Reading::default() };
        sampler.previous = sampler.read(now_ms);
        sampler
    }

    pub fn measured(&self) -> Measured {
        self.measured
    }

    fn read(&self, at_ms: i64) -> Reading {
        let text = |path: &str| std::fs::read_to_string(path).ok();
        let cgroup = self.cgroup.as_ref();
        Reading {
            at_ms,
            cpu: text("/proc/stat").as_deref().and_then(procfs::cpu_jiffies),
            cgroup_cpu_us: cgroup.and_then(|c| c.cpu_usage_us().ok()),
            vmstat: text("/proc/vmstat").map(|t| procfs::key_values(&t)).unwrap_or_default(),
            cgroup_oom_kills: cgroup.and_then(|c| c.oom_kills().ok()),
            disks: text("/proc/diskstats").map(|t| procfs::diskstats(&t, is_whole_disk)).unwrap_or_default(),
            net: text("/proc/net/dev").map(|t| procfs::net_dev(&t)),
            retransmits: text("/proc/net/snmp").as_deref().and_then(procfs::tcp_retransmits),
        }
    }

    /// Every metric now; `rtt_ms` is the last heartbeat round trip, when there is a recent one.
    pub fn sample(&mut self, now_ms: i64, rtt_ms: Result<f64, String>) -> (Sample, Absent) {
        let now = self.read(now_ms);
        let before = std::mem::replace(&mut self.previous, now.clone());
        let seconds = (now.at_ms - before.at_ms) as f64 / 1000.0;
        let mut out = Out::default();
        let rate = |after: Option<u64>, earlier: Option<u64>| -> Result<f64, String> {
            match (after, earlier) {
                (Some(a), Some(b)) if a >= b && seconds > 0.0 => Ok((a - b) as f64 / seconds),
                (Some(_), Some(_)) => Err("the counter went back since the last sample (a restart?)".into()),
                _ => Err("the kernel's counter could not be read".into()),
            }
        };
        match &self.cgroup {
            Some(cgroup) => {
                // Microseconds of CPU per second, against every allowed CPU's second.
                let used = rate(now.cgroup_cpu_us, before.cgroup_cpu_us);
                // At most every CPU busy: a counter read a few ms after its timestamp would
                // otherwise say 100.1% of a fully busy second.
                out.put("cpu_busy_pct", used.map(|us_per_s| (us_per_s / (1e6 * self.cpus) * 100.0).min(100.0)));
                let meminfo = std::fs::read_to_string("/proc/meminfo").map(|t| procfs::meminfo(&t)).unwrap_or_default();
                match cgroup.memory() {
                    Ok((used, Some(limit))) => {
                        out.put("mem_used_pct", Ok(pct(used, limit)));
                        out.put("mem_available_bytes", Ok(limit.saturating_sub(used) as f64));
                    }
                    Ok((used, None)) => {
                        let total = meminfo.get("MemTotal").copied().ok_or("/proc/meminfo has no MemTotal".to_string());
                        out.put("mem_used_pct", total.map(|t| pct(used, t)));
                        out.put("mem_available_bytes", available(&meminfo));
                    }
                    Err(why) => {
                        out.put("mem_used_pct", Err(why.clone()));
                        out.put("mem_available_bytes", Err(why));
                    }
                }
                for resource in ["cpu", "memory", "io"] {
                    out.put(pressure_metric(resource), cgroup.pressure(resource));
                }
                out.put("oom_kills", kills(now.cgroup_oom_kills, before.cgroup_oom_kills));
                // What the declarations say a cgroup cannot give, with their reason.
                for metric in METRICS {
                    if let Err(why) = metric.cgroup_source {
                        out.absent(metric.name, &format!("measured in a container: {why}"));
                    }
                }
            }
            None if self.cgroup_missing.is_some() => {
                let why = self.cgroup_missing.clone().unwrap_or_default();
                for cgroup_only in ["cpu_busy_pct", "mem_used_pct", "mem_available_bytes", "oom_kills"] {
                    out.absent(cgroup_only, &format!("measuring the container was asked for, but {why}"));
                }
            }
            None => self.host(&now, &before, seconds, &mut out),
        }
        match fullest_filesystem() {
            Ok((mount, free)) => {
                out.put("disk_free_pct", Ok(free));
                out.fullest = Some(mount);
            }
            Err(why) => out.put("disk_free_pct", Err(why)),
        }
        let mut interfaces = BTreeMap::new();
        match (&now.net, &before.net) {
            (Some(after), Some(earlier)) => {
                let (totals, each) = super::interfaces::rates(after, earlier, seconds);
                for (metric, total) in totals {
                    out.put(metric, Ok(total));
                }
                interfaces = each;
            }
            _ => {
                for metric in ["net_rx_bytes_per_s", "net_tx_bytes_per_s", "net_errors_per_s", "net_drops_per_s"] {
                    out.absent(metric, "/proc/net/dev could not be read");
                }
            }
        }
        out.put("tcp_retransmits_per_s", rate(now.retransmits, before.retransmits));
        out.put("heartbeat_rtt_ms", rtt_ms);
        out.put("failed_units", super::systemd::failed_units());
        out.put("boot_duration_ms", super::systemd::boot_duration_ms());
        (
            Sample {
                at_ms: now_ms,
                values: out.values,
                fullest_filesystem: out.fullest,
                apps: BTreeMap::new(),
                interfaces,
                packages: BTreeMap::new(),
            },
            out.absent,
        )
    }

    /// The host's own view: `/proc` as the kernel keeps it for the whole machine.
    fn host(&self, now: &Reading, before: &Reading, seconds: f64, out: &mut Out) {
        match (now.cpu, before.cpu) {
            (Some((busy, steal, total)), Some((busy0, steal0, total0))) if total > total0 => {
                let span = (total - total0) as f64;
                out.put("cpu_busy_pct", Ok(busy.saturating_sub(busy0) as f64 / span * 100.0));
                out.put("cpu_steal_pct", Ok(steal.saturating_sub(steal0) as f64 / span * 100.0));
            }
            _ => {
                out.absent("cpu_busy_pct", "/proc/stat gave no CPU time since the last sample");
                out.absent("cpu_steal_pct", "/proc/stat gave no CPU time since the last sample");
            }
        }
        let load = std::fs::read_to_string("/proc/loadavg").ok().as_deref().and_then(procfs::load_1);
        out.put("load_1", load.ok_or_else(|| "/proc/loadavg could not be read".into()));
        let meminfo = std::fs::read_to_string("/proc/meminfo").map(|t| procfs::meminfo(&t)).unwrap_or_default();
        let total = meminfo.get("MemTotal").copied();
        let used = available(&meminfo).ok().zip(total).map(|(a, t)| pct(t.saturating_sub(a as u64), t));
        out.put("mem_used_pct", used.ok_or_else(|| "/proc/meminfo has no MemTotal or MemAvailable".into()));
        out.put("mem_available_bytes", available(&meminfo));
        let commit = meminfo.get("Committed_AS").map(|c| *c as f64);
        out.put("commit_bytes", commit.ok_or_else(|| "/proc/meminfo has no Committed_AS".into()));
        for resource in ["cpu", "memory", "io"] {
            let file = format!("/proc/pressure/{resource}");
            let value = std::fs::read_to_string(&file)
                .map_err(|_| format!("{file} is absent: this kernel keeps no pressure stall information (PSI)"))
                .and_then(|t| procfs::pressure_some_avg10(&t).ok_or_else(|| format!("{file}: no `some avg10`")));
            out.put(pressure_metric(resource), value);
        }
        let counter = |key: &str| -> Result<f64, String> {
            match (now.vmstat.get(key), before.vmstat.get(key)) {
                (Some(a), Some(b)) if a >= b && seconds > 0.0 => Ok((a - b) as f64 / seconds),
                (Some(_), Some(_)) => Err("the counter went back since the last sample (a restart?)".into()),
                _ => Err(format!("/proc/vmstat has no `{key}`")),
            }
        };
        out.put("swap_in_per_s", counter("pswpin"));
        out.put("swap_out_per_s", counter("pswpout"));
        out.put("oom_kills", kills(now.vmstat.get("oom_kill").copied(), before.vmstat.get("oom_kill").copied()));
        let (mut busiest, mut ios, mut io_ms) = (None::<f64>, 0u64, 0u64);
        for (name, after) in &now.disks {
            let Some(earlier) = before.disks.get(name) else { continue };
            let busy = after.busy_ms.saturating_sub(earlier.busy_ms) as f64 / (seconds * 1000.0).max(1.0) * 100.0;
            busiest = Some(busiest.map_or(busy, |b: f64| b.max(busy)).min(100.0));
            ios += after.ios.saturating_sub(earlier.ios);
            io_ms += after.io_ms.saturating_sub(earlier.io_ms);
        }
        out.put("disk_busy_pct", busiest.ok_or_else(|| "/proc/diskstats lists no disk".into()));
        let latency = (ios > 0).then(|| io_ms as f64 / ios as f64);
        out.put("disk_latency_ms", latency.ok_or_else(|| "no disk I/O completed since the last sample".into()));
    }
}

#[derive(Default)]
struct Out {
    values: BTreeMap<String, f64>,
    absent: Absent,
    fullest: Option<String>,
}

impl Out {
    fn put(&mut self, metric: &str, value: Result<f64, String>) {
        self.values.remove(metric);
        self.absent.remove(metric);
        match value {
            Ok(v) if v.is_finite() => {
                self.values.insert(metric.to_string(), (v * 1000.0).round() / 1000.0);
            }
            Ok(v) => self.absent(metric, &format!("computed {v}, not a number")),
            Err(why) => self.absent(metric, &why),
        }
    }

    fn absent(&mut self, metric: &str, why: &str) {
        self.absent.insert(metric.to_string(), why.to_string());
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 { 0.0 } else { part as f64 / whole as f64 * 100.0 }
}

fn available(meminfo: &BTreeMap<String, u64>) -> Result<f64, String> {
    meminfo.get("MemAvailable").map(|a| *a as f64).ok_or_else(|| "/proc/meminfo has no MemAvailable".into())
}

fn pressure_metric(resource: &str) -> &'static str {
    match resource {
        "cpu" => "cpu_pressure_pct",
        "memory" => "mem_pressure_pct",
        _ => "io_pressure_pct",
    }
}

/// Kills since the last sample (a count, not a rate).
fn kills(now: Option<u64>, before: Option<u64>) -> Result<f64, String> {
    match (now, before) {
        (Some(a), Some(b)) => Ok(a.saturating_sub(b) as f64),
        _ => Err("the kernel keeps no OOM kill count here (before Linux 4.13)".into()),
    }
}

/// Whole disks: what `/sys/block` lists, but loop, RAM and compressed-RAM devices.
fn is_whole_disk(name: &str) -> bool {
    !["loop", "ram", "zram"].iter().any(|p| name.starts_with(p)) && Path::new("/sys/block").join(name).exists()
}

/// The local filesystem with the least free space: its mount point and free share.
fn fullest_filesystem() -> Result<(String, f64), String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").map_err(|e| format!("/proc/self/mounts: {e}"))?;
    procfs::local_mounts(&mounts)
        .into_iter()
        .filter_map(|mount| {
            let stat = nix::sys::statvfs::statvfs(mount.as_str()).ok()?;
            let blocks = stat.blocks() as u64;
            (blocks > 0).then(|| (mount, stat.blocks_available() as f64 / blocks as f64 * 100.0))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .ok_or_else(|| "no local writable filesystem is mounted".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every declared metric is measured or says why not: nothing is left out silently (but
    /// the one process exits give, which their watch puts in or says why not).
    fn accounts_for_every_metric(sample: &Sample, absent: &Absent) {
        for metric in METRICS.iter().filter(|m| m.name != super::super::exits::METRIC) {
            let measured = sample.values.contains_key(metric.name);
            assert!(measured != absent.contains_key(metric.name), "{}: {sample:?} {absent:?}", metric.name);
        }
        for (name, value) in &sample.values {
            assert!(value.is_finite() && *value >= 0.0, "{name} = {value}");
            if name.ends_with("_pct") {
                assert!(*value <= 100.0, "{name} = {value}");
            }
        }
    }

    /// This very machine, as the host: the kernel's own files give every host metric.
    #[test]
    fn the_host_is_read_from_the_kernels_files() {
        let mut sampler = Sampler::new(None, 0);
        // Some CPU time passes between the two readings.
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(50) {}
        let (sample, absent) = sampler.sample(1_000, Ok(4.0));
        accounts_for_every_metric(&sample, &absent);
        assert_eq!(sampler.measured(), Measured::Host);
        for metric in ["cpu_busy_pct", "load_1", "mem_used_pct", "mem_available_bytes", "commit_bytes", "disk_free_pct"]
        {
            assert!(sample.values.contains_key(metric), "{metric}: {absent:?}");
        }
        assert!(sample.fullest_filesystem.is_some());
        assert_eq!(sample.values["heartbeat_rtt_ms"], 4.0);
    }

    /// The agent's own cgroup (v1 or v2, whichever this machine has): what the kernel keeps
    /// only for the whole machine is absent, and says so.
    #[test]
    fn a_cgroup_gives_its_own_cpu_and_memory_and_names_what_it_cannot() {
        let mut sampler = Sampler::new(Some(Cgroup::locate(false)), 0);
        let (sample, absent) = sampler.sample(1_000, Err("not connected".into()));
        accounts_for_every_metric(&sample, &absent);
        assert_eq!(sampler.measured(), Measured::Cgroup);
        for metric in ["cpu_busy_pct", "mem_used_pct", "mem_available_bytes"] {
            assert!(sample.values.contains_key(metric), "{metric}: {absent:?}");
        }
        for metric in ["load_1", "commit_bytes", "cpu_steal_pct"] {
            assert!(absent[metric].contains("whole machine"), "{metric}: {absent:?}");
        }
        assert_eq!(absent["heartbeat_rtt_ms"], "not connected");
    }
}

//! The kernel's own files, read as text and parsed without interpretation: counters here are
//! cumulative, and the sampler turns two readings into rates.

use std::collections::BTreeMap;

/// `/proc/stat`'s first line: (busy, steal, total) jiffies over every CPU. Busy is all but
/// idle and iowait; steal is counted in busy too (the CPU was not ours but not idle either).
pub fn cpu_jiffies(stat: &str) -> Option<(u64, u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line.split_whitespace().skip(1).map(|f| f.parse().unwrap_or(0)).collect();
    // user nice system idle iowait irq softirq steal (guest and guest_nice are in user already)
    let get = |i: usize| fields.get(i).copied().unwrap_or(0);
    let total: u64 = (0..8).map(get).sum();
    let idle = get(3) + get(4);
    Some((total.saturating_sub(idle), get(7), total))
}

/// `/proc/loadavg`'s one-minute average.
pub fn load_1(loadavg: &str) -> Option<f64> {
    loadavg.split_whitespace().next()?.parse().ok()
}

/// A `key: value kB` file (`/proc/meminfo`) as bytes per key.
pub fn meminfo(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let (key, rest) = line.split_once(':')?;
            let mut parts = rest.split_whitespace();
            let value: u64 = parts.next()?.parse().ok()?;
            let scale = if parts.next() == Some("kB") { 1024 } else { 1 };
            Some((key.to_string(), value * scale))
        })
        .collect()
}

/// A `key value` file (`/proc/vmstat`, cgroup `cpu.stat`, `memory.events`) as numbers per key.
pub fn key_values(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            Some((parts.next()?.to_string(), parts.next()?.parse().ok()?))
        })
        .collect()
}

/// A PSI file's `some avg10` (`/proc/pressure/cpu`, `memory.pressure`).
pub fn pressure_some_avg10(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace().find_map(|f| f.strip_prefix("avg10=")).and_then(|v| v.parse().ok())
}

/// One disk's cumulative I/O counters from `/proc/diskstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DiskCounters {
    pub ios: u64,
    pub io_ms: u64,
    pub busy_ms: u64,
}

/// `/proc/diskstats`, for the devices `is_disk` keeps (whole disks, not partitions or loops).
pub fn diskstats(text: &str, is_disk: impl Fn(&str) -> bool) -> BTreeMap<String, DiskCounters> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let name = *f.get(2)?;
            let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            is_disk(name).then(|| {
                // reads completed (3), ms reading (6), writes completed (7), ms writing (10),
                // ms doing I/O (12), counted from the name's field.
                let counters = DiskCounters { ios: n(3) + n(7), io_ms: n(6) + n(10), busy_ms: n(12) };
                (name.to_string(), counters)
            })
        })
        .collect()
}

/// Cumulative counters of one interface, from `/proc/net/dev`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NetCounters {
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub errors: u64,
    pub drops: u64,
}

/// Every interface but loopback, by name.
pub fn net_dev(text: &str) -> BTreeMap<String, NetCounters> {
    let mut each = BTreeMap::new();
    for line in text.lines().skip(2) {
        let Some((name, rest)) = line.split_once(':') else { continue };
        let name = name.trim();
        if name == "lo" {
            continue;
        }
        let f: Vec<u64> = rest.split_whitespace().map(|v| v.parse().unwrap_or(0)).collect();
        let n = |i: usize| f.get(i).copied().unwrap_or(0);
        let counters = NetCounters { rx_bytes: n(0), tx_bytes: n(8), errors: n(2) + n(10), drops: n(3) + n(11) };
        each.insert(name.to_string(), counters);
    }
    each
}

/// `Tcp: RetransSegs` from `/proc/net/snmp` (a header line, then a line of values).
pub fn tcp_retransmits(snmp: &str) -> Option<u64> {
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (header, values) = (tcp.next()?, tcp.next()?);
    let at = header.split_whitespace().position(|h| h == "RetransSegs")?;
    values.split_whitespace().nth(at)?.parse().ok()
}

/// The local filesystems of a mounts table (`/proc/self/mounts`): writable mount points that
/// keep files, on a device or in memory (a full `/tmp` or `/run` tmpfs is as real a problem as
/// a full disk), not the kernel's own views (proc, sysfs, cgroup, devtmpfs…). A read-only one
/// (a squashfs image) is full by design, never a problem to report.
pub fn local_mounts(mounts: &str) -> Vec<String> {
    const PSEUDO: &[&str] = &[
        "proc",
        "sysfs",
        "devtmpfs",
        "devpts",
        "cgroup",
        "cgroup2",
        "securityfs",
        "pstore",
        "bpf",
        "debugfs",
        "tracefs",
        "mqueue",
        "hugetlbfs",
        "configfs",
        "fusectl",
        "autofs",
        "binfmt_misc",
        "ramfs",
        "nsfs",
        "rpc_pipefs",
        "squashfs",
        "efivarfs",
        "fuse.lxcfs",
    ];
    let mut seen = Vec::new();
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(point), Some(kind), Some(options)) = (f.get(1), f.get(2), f.get(3)) else { continue };
        if options.split(',').any(|o| o == "ro") {
            continue;
        }
        // `\040` is a space in a mount point.
        let point = point.replace("\\040", " ");
        if !PSEUDO.contains(kind) && !seen.contains(&point) {
            seen.push(point);
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_busy_is_all_but_idle_and_iowait() {
        let stat = "cpu  100 5 50 800 40 3 2 10 0 0\ncpu0 50 2 25 400 20 1 1 5 0 0\nintr 1\n";
        assert_eq!(cpu_jiffies(stat), Some((170, 10, 1010)));
    }

    #[test]
    fn meminfo_is_bytes_and_key_values_are_numbers() {
        let info = meminfo("MemTotal:       16384 kB\nMemAvailable:    8192 kB\nHugePages_Total:       0\n");
        assert_eq!(info["MemTotal"], 16 * 1024 * 1024);
        assert_eq!(info["HugePages_Total"], 0);
        assert_eq!(key_values("pswpin 7\noom_kill 2\n")["oom_kill"], 2);
    }

    #[test]
    fn pressure_reads_some_avg10() {
        let psi = "some avg10=12.50 avg60=3.00 avg300=1.00 total=123\nfull avg10=1.00 avg60=0 avg300=0 total=1\n";
        assert_eq!(pressure_some_avg10(psi), Some(12.5));
    }

    #[test]
    fn diskstats_keep_whole_disks_and_add_reads_to_writes() {
        let text = "   8       0 sda 100 0 800 40 50 0 400 60 0 90 100 0 0 0 0\n   8       1 sda1 1 0 8 1 1 0 8 1 0 1 2\n   7       0 loop0 5 0 10 1 0 0 0 0 0 1 1\n";
        let disks = diskstats(text, |name| name == "sda");
        assert_eq!(disks.len(), 1);
        assert_eq!(disks["sda"], DiskCounters { ios: 150, io_ms: 100, busy_ms: 90 });
    }

    #[test]
    fn net_dev_reads_every_interface_but_loopback() {
        let text = "Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier compressed\n    lo: 500 5 0 0 0 0 0 0 500 5 0 0 0 0 0 0\n  eth0: 1000 10 1 2 0 0 0 0 2000 20 3 4 0 0 0 0\n";
        let eth0 = NetCounters { rx_bytes: 1000, tx_bytes: 2000, errors: 4, drops: 6 };
        assert_eq!(net_dev(text), BTreeMap::from([("eth0".to_string(), eth0)]));
    }

    #[test]
    fn snmp_finds_retransmitted_segments_by_header() {
        let text =
            "Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm RtoMin RetransSegs InErrs\nTcp: 1 200 42 0\n";
        assert_eq!(tcp_retransmits(text), Some(42));
    }

    #[test]
    fn local_mounts_leave_out_the_kernels_own() {
        let text = "proc /proc proc rw 0 0\n/dev/sda1 / ext4 rw 0 0\ntmpfs /run tmpfs rw 0 0\n/dev/loop0 /mnt/small\\040disk ext4 rw 0 0\n/dev/loop1 /snap/x squashfs ro 0 0\n/dev/sdb1 /srv xfs ro,noatime 0 0\n";
        assert_eq!(local_mounts(text), ["/", "/run", "/mnt/small disk"]);
    }
}

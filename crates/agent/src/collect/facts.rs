//! The host's facts: identity, OS, kernel, CPU, memory, uptime, addresses, disks.

use std::collections::BTreeSet;
use std::fs;

use toolgate_domain::fleet::{Disk, HostFacts};

fn read_trimmed(path: &str) -> String {
    fs::read_to_string(path).map(|s| s.trim().to_string()).unwrap_or_default()
}

/// KEY=VALUE pairs of os-release(5), values unquoted.
pub(crate) fn os_release() -> Vec<(String, String)> {
    let text = fs::read_to_string("/etc/os-release")
        .or_else(|_| fs::read_to_string("/usr/lib/os-release"))
        .unwrap_or_default();
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches(|c| c == '"' || c == '\'').to_string()))
        .collect()
}

fn field<'a>(pairs: &'a [(String, String)], key: &str) -> &'a str {
    pairs.iter().find(|(k, _)| k == key).map_or("", |(_, v)| v.as_str())
}

/// The first number on the line of /proc/meminfo that starts with `key`, in bytes.
fn meminfo_bytes(meminfo: &str, key: &str) -> u64 {
    meminfo
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Filesystems that hold no user data.
const PSEUDO_FILESYSTEMS: &[&str] = &[
    "proc",
    "sysfs",
    "tmpfs",
    "devtmpfs",
    "devpts",
    "cgroup",
    "cgroup2",
    "mqueue",
    "securityfs",
    "debugfs",
    "tracefs",
    "pstore",
    "bpf",
    "hugetlbfs",
    "autofs",
    "configfs",
    "fusectl",
    "binfmt_misc",
    "nsfs",
    "rpc_pipefs",
    "ramfs",
    "efivarfs",
    "squashfs",
    "fuse.lxcfs",
    "selinuxfs",
];

fn disks() -> Vec<Disk> {
    let mounts = fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mut seen = BTreeSet::new();
    let mut disks = Vec::new();
    for line in mounts.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [_, mount, filesystem, ..] = parts[..] else { continue };
        // Spaces in mount points are written as \040.
        let mount = mount.replace("\\040", " ");
        if PSEUDO_FILESYSTEMS.contains(&filesystem) || !seen.insert(mount.clone()) {
            continue;
        }
        let Ok(stat) = nix::sys::statvfs::statvfs(mount.as_str()) else { continue };
        let block = stat.fragment_size();
        disks.push(Disk {
            mount,
            filesystem: filesystem.to_string(),
            size_bytes: stat.blocks() * block,
            free_bytes: stat.blocks_available() * block,
        });
    }
    disks
}

/// Every address of every interface but the loopback ones.
pub(crate) fn ip_addresses() -> Vec<String> {
    let Ok(addresses) = nix::ifaddrs::getifaddrs() else { return Vec::new() };
    let mut out = Vec::new();
    for a in addresses {
        let Some(address) = a.address else { continue };
        let ip = if let Some(v4) = address.as_sockaddr_in() {
            std::net::IpAddr::V4(v4.ip())
        } else if let Some(v6) = address.as_sockaddr_in6() {
            std::net::IpAddr::V6(v6.ip())
        } else {
            continue;
        };
        if !ip.is_loopback() && !out.contains(&ip.to_string()) {
            out.push(ip.to_string());
        }
    }
    out
}

/// What a package's maintainer scripts create when the host needs a reboot (Debian, Ubuntu).
pub(crate) const REBOOT_MARKER: &str = "/run/reboot-required";

pub fn host_facts() -> HostFacts {
    let os = os_release();
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or(String::new(), |(_, v)| v.trim().to_string());
    let cpu_count = cpuinfo.lines().filter(|l| l.starts_with("processor")).count() as u32;
    let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let uptime_secs = read_trimmed("/proc/uptime")
        .split_whitespace()
        .next()
        .and_then(|s| s.parse::<f64>().ok())
        .map_or(0, |s| s as u64);
    let boot_time = fs::read_to_string("/proc/stat")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    HostFacts {
        hostname: read_trimmed("/proc/sys/kernel/hostname"),
        os_name: field(&os, "NAME").to_string(),
        os_id: field(&os, "ID").to_string(),
        os_version: field(&os, "VERSION_ID").to_string(),
        os_pretty_name: field(&os, "PRETTY_NAME").to_string(),
        kernel: read_trimmed("/proc/sys/kernel/osrelease"),
        arch: nix::sys::utsname::uname().map(|u| u.machine().to_string_lossy().into_owned()).unwrap_or_default(),
        cpu_model,
        cpu_count: cpu_count.max(1),
        memory_total_bytes: meminfo_bytes(&meminfo, "MemTotal:"),
        memory_available_bytes: meminfo_bytes(&meminfo, "MemAvailable:"),
        uptime_secs,
        boot_time,
        ip_addresses: ip_addresses(),
        disks: disks(),
        agent_version: env!("CARGO_PKG_VERSION").to_string(),
        init_system: if super::systemd::systemd_runs() { "systemd".into() } else { read_trimmed("/proc/1/comm") },
        reboot_required: std::path::Path::new(REBOOT_MARKER).exists(),
        model: read_trimmed("/sys/class/dmi/id/product_name"),
    }
    .clipped()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_this_hosts() {
        let facts = host_facts();
        let uname = nix::sys::utsname::uname().unwrap();
        assert_eq!(facts.hostname, uname.nodename().to_string_lossy());
        assert_eq!(facts.kernel, uname.release().to_string_lossy());
        assert!(!facts.os_name.is_empty() && !facts.kernel.is_empty() && !facts.arch.is_empty(), "{facts:?}");
        assert!(facts.memory_total_bytes >= facts.memory_available_bytes && facts.memory_total_bytes > 0);
        assert!(facts.boot_time > 1_000_000_000, "{facts:?}");
        assert!(!facts.disks.is_empty(), "{facts:?}");
    }
}

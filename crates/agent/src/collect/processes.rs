//! processes: /proc/PID/stat, status and cmdline.

use std::fs;
use std::path::Path;

use serde_json::json;

use super::{Row, Unavailable, row};

/// One process as /proc shows it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Process {
    pub pid: i64,
    pub ppid: i64,
    pub name: String,
    pub state: String,
    pub uid: i64,
    pub rss_bytes: i64,
    pub cmdline: String,
    /// When it started, in ms since the epoch: with the PID, what tells it from a later
    /// process given the same PID.
    pub start_time_ms: i64,
}

/// What /proc/PID/stat says of a process.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Stat<'a> {
    pub name: &'a str,
    pub state: &'a str,
    pub ppid: i64,
    /// The kernel's `PF_*` flags.
    pub flags: u64,
    /// User and system CPU time, in clock ticks (its ended threads' included).
    pub cpu_ticks: u64,
    /// When it started, in clock ticks since boot.
    pub start_ticks: i64,
    pub rss_pages: i64,
}

/// `PF_KTHREAD`: the process is one of the kernel's own threads.
const KERNEL_THREAD: u64 = 0x0020_0000;

impl Stat<'_> {
    pub fn is_kernel_thread(&self) -> bool {
        self.flags & KERNEL_THREAD != 0
    }
}

/// The fields of /proc/PID/stat after the command name, which may itself hold spaces and
/// parentheses.
pub(crate) fn parse_stat(stat: &str) -> Option<Stat<'_>> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?;
    let rest: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // After the name, field n of the whole line is at n - 3: state(3) ppid(4) flags(9)
    // utime(14) stime(15) starttime(22) rss(24).
    let number = |n: usize| rest.get(n - 3)?.parse::<i64>().ok();
    let unsigned = |n: usize| rest.get(n - 3)?.parse::<u64>().ok();
    Some(Stat {
        name,
        state: rest.first()?,
        ppid: number(4)?,
        flags: unsigned(9)?,
        cpu_ticks: unsigned(14)?.saturating_add(unsigned(15)?),
        start_ticks: number(22)?,
        rss_pages: number(24)?,
    })
}

/// The boot time (`btime` of /proc/stat), in seconds since the epoch.
fn boot_time_secs() -> i64 {
    let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
    stat.lines().find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok()).unwrap_or(0)
}

pub(crate) fn clock_ticks_per_sec() -> i64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().filter(|t| *t > 0).unwrap_or(100)
}

pub(crate) fn page_size() -> i64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).ok().flatten().unwrap_or(4096)
}

/// What converts /proc's figures: read once per listing.
struct Units {
    boot_ms: i64,
    ticks_per_sec: i64,
    page: i64,
}

impl Units {
    fn now() -> Self {
        Units { boot_ms: boot_time_secs() * 1000, ticks_per_sec: clock_ticks_per_sec(), page: page_size() }
    }
}

fn read(dir: &Path, pid: i64, units: &Units) -> Option<Process> {
    // A process may exit between the listing and the reads: then it is none.
    let stat = fs::read_to_string(dir.join("stat")).ok()?;
    let Stat { name, state, ppid, start_ticks, rss_pages, .. } = parse_stat(&stat)?;
    let uid = fs::read_to_string(dir.join("status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|u| u.split_whitespace().next()?.parse::<i64>().ok())
        })
        .unwrap_or(-1);
    let cmdline = fs::read(dir.join("cmdline")).unwrap_or_default();
    Some(Process {
        pid,
        ppid,
        name: name.to_string(),
        state: state.to_string(),
        uid,
        rss_bytes: rss_pages * units.page,
        cmdline: String::from_utf8_lossy(&cmdline).trim_end_matches('\0').replace('\0', " "),
        start_time_ms: units.boot_ms + start_ticks * 1000 / units.ticks_per_sec,
    })
}

/// The process `pid`, if it runs.
pub(crate) fn process(pid: i64) -> Option<Process> {
    read(&Path::new("/proc").join(pid.to_string()), pid, &Units::now())
}

/// Every process running now, by PID.
pub(crate) fn all() -> Result<Vec<Process>, Unavailable> {
    let units = Units::now();
    let mut list = Vec::new();
    for entry in fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i64>().ok()) else { continue };
        list.extend(read(&entry.path(), pid, &units));
    }
    list.sort_by_key(|p| p.pid);
    Ok(list)
}

pub fn processes() -> Result<Vec<Row>, Unavailable> {
    Ok(all()?
        .into_iter()
        .map(|p| {
            row([
                ("pid", json!(p.pid)),
                ("ppid", json!(p.ppid)),
                ("name", json!(p.name)),
                ("state", json!(p.state)),
                ("uid", json!(p.uid)),
                ("rss_bytes", json!(p.rss_bytes)),
                ("cmdline", json!(p.cmdline)),
                ("start_time_ms", json!(p.start_time_ms)),
            ])
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_parentheses_and_spaces() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 100 1000 250 18446744073709551615";
        let parsed = parse_stat(stat).unwrap();
        assert_eq!(
            (parsed.name, parsed.state, parsed.ppid, parsed.start_ticks, parsed.rss_pages),
            ("a (b) c", "S", 1, 100, 250)
        );
        assert_eq!((parsed.cpu_ticks, parsed.flags), (3, 4194560));
        assert!(!parsed.is_kernel_thread());
    }

    #[test]
    fn this_process_is_listed_with_when_it_started() {
        let me = i64::from(std::process::id());
        let found = all().unwrap().into_iter().find(|p| p.pid == me).expect("listed");
        let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
        assert!(found.start_time_ms > now_ms - 3_600_000 && found.start_time_ms <= now_ms + 1000, "{found:?}");
        assert_eq!(process(me).map(|p| p.start_time_ms), Some(found.start_time_ms), "the same on every read");
    }
}

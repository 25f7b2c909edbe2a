//! What each program costs (docs/experience.md, "Programs"): its CPU time and resident memory
//! from the process table, read at every sample, and how many of its processes started. Only
//! the busiest and the largest programs are named, beside those process exits named, so that a
//! sample stays small whatever the host runs.
//!
//! Starts: where process exits are counted, a program's starts are its exits plus the change
//! in its running processes, which counts even those that started and ended between two
//! samples; otherwise only the processes first seen running.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;

use toolgate_domain::fleet::experience::Sample;
use toolgate_domain::fleet::parts::{MAX_PARTS_PER_SAMPLE, TOP_PROGRAMS};

use super::packages::Packages;
use crate::collect::processes::{self, parse_stat};

/// A process at the last reading.
#[derive(Clone, Copy)]
struct Seen {
    start_ticks: i64,
    cpu_ticks: u64,
}

/// A program's processes at one reading.
#[derive(Default)]
struct Usage {
    /// CPU ticks since the last reading.
    cpu_ticks: u64,
    rss_bytes: u64,
    running: u64,
    /// Processes not running at the last reading.
    new: u64,
    /// Its process that used the most CPU since the last reading: whose executable names its
    /// package.
    heaviest: Option<(u64, i64)>,
}

/// The process table between samples.
pub struct Programs {
    seen: HashMap<i64, Seen>,
    running: HashMap<String, u64>,
    /// Whether the table was read before: the first reading gives no intervals.
    read_before: bool,
    ticks_per_s: f64,
    page_bytes: u64,
    packages: Packages,
}

impl Default for Programs {
    fn default() -> Self {
        Programs {
            seen: HashMap::new(),
            running: HashMap::new(),
            read_before: false,
            ticks_per_s: processes::clock_ticks_per_sec() as f64,
            page_bytes: processes::page_size().max(1) as u64,
            packages: Packages::default(),
        }
    }
}

impl Programs {
    /// Reads the process table and puts the busiest and largest programs into `sample`, with
    /// every program already there (those process exits named): their CPU time, memory and
    /// starts, and the package each one's executable belongs to. `exits_counted` says whether
    /// the sample's `exits` count every process that ended.
    pub fn add_to(&mut self, sample: &mut Sample, exits_counted: bool) {
        let (usage, kernel_threads) = self.read();
        let first = !std::mem::replace(&mut self.read_before, true);
        let previously_running = std::mem::take(&mut self.running);
        self.running = usage.iter().map(|(name, u)| (name.clone(), u.running)).collect();
        if first {
            return;
        }
        let mut chosen: Vec<&String> = top(&usage, |u| u.cpu_ticks);
        chosen.extend(top(&usage, |u| u.rss_bytes));
        for name in chosen {
            if !sample.apps.contains_key(name) && sample.apps.len() < MAX_PARTS_PER_SAMPLE {
                sample.apps.insert(name.clone(), BTreeMap::new());
            }
        }
        let names: Vec<String> = sample.apps.keys().cloned().collect();
        for name in names {
            if kernel_threads.contains(&name) {
                continue;
            }
            let values = sample.apps.entry(name.clone()).or_default();
            let exits = values.get("exits").copied().unwrap_or(0.0) as u64;
            let here = usage.get(&name);
            let running = here.map_or(0, |u| u.running);
            let before = previously_running.get(&name).copied().unwrap_or(0);
            let starts =
                if exits_counted { (exits + running).saturating_sub(before) } else { here.map_or(0, |u| u.new) };
            if starts > 0 {
                values.insert("starts".into(), starts as f64);
            }
            let Some(here) = here else { continue };
            values.insert("cpu_seconds".into(), here.cpu_ticks as f64 / self.ticks_per_s);
            values.insert("rss_bytes".into(), here.rss_bytes as f64);
            if let Some((_, pid)) = here.heaviest
                && let Some(owner) = self.packages.owner_of(&name, pid)
            {
                sample.packages.insert(name, owner);
            }
        }
    }

    /// Every program running now (the kernel's threads apart, counted by name), and what it
    /// used since the last reading.
    fn read(&mut self) -> (BTreeMap<String, Usage>, HashSet<String>) {
        let mut usage: BTreeMap<String, Usage> = BTreeMap::new();
        let mut kernel_threads = HashSet::new();
        let mut seen = HashMap::with_capacity(self.seen.len());
        let Ok(entries) = fs::read_dir("/proc") else { return (usage, kernel_threads) };
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i64>().ok()) else { continue };
            // A process may end between the listing and the read: then it is not counted.
            let Ok(text) = fs::read_to_string(entry.path().join("stat")) else { continue };
            let Some(stat) = parse_stat(&text) else { continue };
            if stat.is_kernel_thread() {
                kernel_threads.insert(stat.name.to_string());
                continue;
            }
            let earlier = self.seen.get(&pid).filter(|s| s.start_ticks == stat.start_ticks);
            let used = stat.cpu_ticks.saturating_sub(earlier.map_or(0, |s| s.cpu_ticks));
            seen.insert(pid, Seen { start_ticks: stat.start_ticks, cpu_ticks: stat.cpu_ticks });
            let program = usage.entry(program_name(stat.name)).or_default();
            program.cpu_ticks += used;
            program.rss_bytes += stat.rss_pages.max(0) as u64 * self.page_bytes;
            program.running += 1;
            program.new += u64::from(earlier.is_none());
            if program.heaviest.is_none_or(|(cpu, _)| used > cpu) {
                program.heaviest = Some((used, pid));
            }
        }
        self.seen = seen;
        (usage, kernel_threads)
    }
}

/// The names of the [`TOP_PROGRAMS`] programs with the most of `cost` (none with nothing).
fn top(usage: &BTreeMap<String, Usage>, cost: impl Fn(&Usage) -> u64) -> Vec<&String> {
    let mut ranked: Vec<(&String, u64)> = usage.iter().map(|(n, u)| (n, cost(u))).filter(|(_, c)| *c > 0).collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    ranked.into_iter().take(TOP_PROGRAMS).map(|(n, _)| n).collect()
}

/// A process name as a sample holds it, the same as process exits name it.
fn program_name(raw: &str) -> String {
    super::exits::program_name(raw)
}

#[cfg(test)]
mod tests {
    use std::process::{Command, Stdio};

    use super::*;

    fn sample() -> Sample {
        Sample { at_ms: 1, ..Sample::default() }
    }

    /// A copy of `yes` under a name of its own, writing to nothing: a program that uses a CPU.
    #[test]
    fn a_busy_program_is_named_with_its_cpu_time_memory_and_start() {
        let dir = tempfile::tempdir().unwrap();
        let burner = dir.path().join("tg-prog-burn");
        fs::copy("/usr/bin/yes", &burner).unwrap();
        let mut programs = Programs::default();
        programs.add_to(&mut sample(), false);
        let mut child = Command::new(&burner).stdout(Stdio::null()).spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let mut one = sample();
        programs.add_to(&mut one, false);
        child.kill().unwrap();
        child.wait().unwrap();
        let burning = one.apps.get("tg-prog-burn").unwrap_or_else(|| panic!("named: {:?}", one.apps.keys()));
        assert!(burning["cpu_seconds"] > 0.2, "{burning:?}");
        assert!(burning["rss_bytes"] > 0.0, "{burning:?}");
        assert_eq!(burning.get("starts"), Some(&1.0), "first seen running: {burning:?}");
        assert!(!one.packages.contains_key("tg-prog-burn"), "no package owns a copy in a temporary directory");
        assert!(one.apps.len() <= 2 * TOP_PROGRAMS, "{:?}", one.apps.keys());
    }

    #[test]
    fn starts_are_exits_and_the_change_in_running_processes_where_exits_are_counted() {
        let mut programs = Programs::default();
        programs.add_to(&mut sample(), true);
        let mut one = sample();
        // Three processes of a program that is not running started and ended between samples.
        one.apps.insert("tg-short".into(), BTreeMap::from([("exits".to_string(), 3.0)]));
        programs.add_to(&mut one, true);
        assert_eq!(one.apps["tg-short"].get("starts"), Some(&3.0));
        assert!(!one.apps["tg-short"].contains_key("cpu_seconds"), "not running: no CPU time read");
    }
}

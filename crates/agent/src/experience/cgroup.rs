//! Measuring a container from its cgroup. A container shares the kernel's `/proc/stat`,
//! `/proc/meminfo` and `/proc/pressure`: read there, every container on a machine would report
//! the machine. Its cgroup counts what its own processes use.
//!
//! Which cgroup: in a container, its whole tree: where its PID 1 is (`/proc/1/cgroup`; a
//! systemd PID 1's `init.scope` is left for the tree above it), which in a cgroup namespace is
//! the root it sees; forced outside one (`--measure cgroup`), the agent's own, from
//! `/proc/self/cgroup`. Each counter is read where the host keeps it: the unified hierarchy
//! (cgroup v2, at `/sys/fs/cgroup`, or at `/sys/fs/cgroup/unified` beside the legacy ones on a
//! hybrid host) for CPU time and pressure, and for memory when its controller is there;
//! otherwise the legacy `cpuacct` and `memory` hierarchies (v1).

use std::path::{Path, PathBuf};

use super::procfs::{key_values, pressure_some_avg10};

const ROOT: &str = "/sys/fs/cgroup";

/// Where a cgroup's counters are, in each hierarchy the host has.
#[derive(Clone, Debug, PartialEq)]
pub struct Cgroup {
    /// Its directory in the unified hierarchy (cgroup v2).
    pub unified: Option<PathBuf>,
    /// Its directories in the legacy `cpuacct` and `memory` hierarchies (v1).
    pub cpuacct: Option<PathBuf>,
    pub memory: Option<PathBuf>,
}

impl Cgroup {
    /// The cgroup to measure: the root this process sees (`whole_tree`, in a container), else
    /// the process's own.
    pub fn locate(whole_tree: bool) -> Result<Cgroup, String> {
        // The container's tree is where its PID 1 is: its cgroup namespace's root (`/`), or
        // the cgroup a container without one was given; a systemd PID 1 sits in `init.scope`
        // below the tree it manages.
        let file = if whole_tree { "/proc/1/cgroup" } else { "/proc/self/cgroup" };
        let listed = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
        let path_of = |controller: &str| -> String {
            let path = listed
                .lines()
                .filter_map(|l| {
                    let mut parts = l.splitn(3, ':');
                    Some((parts.nth(1)?, parts.next()?))
                })
                .find(|(controllers, _)| controllers.split(',').any(|c| c == controller))
                .map_or("", |(_, path)| path);
            let path = if whole_tree { path.strip_suffix("/init.scope").unwrap_or(path) } else { path };
            // `/..`: outside this namespace's view, which is then the most it can read.
            if path.split('/').any(|part| part == "..") {
                String::new()
            } else {
                path.trim_start_matches('/').to_string()
            }
        };
        let root = Path::new(ROOT);
        let unified = [root.to_path_buf(), root.join("unified")]
            .into_iter()
            .find(|dir| dir.join("cgroup.controllers").exists())
            .map(|dir| dir.join(path_of("")));
        let legacy = |controller: &str| {
            [controller.to_string(), format!("cpu,{controller}"), format!("{controller},cpu")]
                .into_iter()
                .map(|name| root.join(name))
                .find(|dir| dir.join("cgroup.procs").exists() && dir.join("tasks").exists())
                .map(|dir| dir.join(path_of(controller)))
        };
        let found = Cgroup { unified, cpuacct: legacy("cpuacct"), memory: legacy("memory") };
        if found.unified.is_none() && found.cpuacct.is_none() {
            return Err(format!("no cgroup hierarchy is mounted under {ROOT}"));
        }
        Ok(found)
    }

    /// CPU time its processes used, in microseconds.
    pub fn cpu_usage_us(&self) -> Result<u64, String> {
        if let Some(dir) = &self.unified {
            let file = dir.join("cpu.stat");
            return key_values(&read(&file)?)
                .get("usage_usec")
                .copied()
                .ok_or_else(|| format!("{}: no usage_usec", file.display()));
        }
        let cpuacct = self.cpuacct.as_ref().ok_or("no cpuacct hierarchy")?;
        number(&cpuacct.join("cpuacct.usage")).map(|ns| ns / 1000)
    }

    /// The unified directory, when its memory controller is enabled there.
    fn unified_memory(&self) -> Option<&PathBuf> {
        self.unified.as_ref().filter(|dir| dir.join("memory.current").exists())
    }

    /// Memory its processes use (its working set: the page cache it could drop at once, the
    /// inactive file pages, left out, as `docker stats` and the kubelet count it), and its
    /// limit when it has one.
    pub fn memory(&self) -> Result<(u64, Option<u64>), String> {
        let (usage, limit, stat, inactive) = match (self.unified_memory(), &self.memory) {
            (Some(dir), _) => (
                number(&dir.join("memory.current"))?,
                read(&dir.join("memory.max"))?,
                read(&dir.join("memory.stat")).unwrap_or_default(),
                "inactive_file",
            ),
            (None, Some(dir)) => (
                number(&dir.join("memory.usage_in_bytes"))?,
                read(&dir.join("memory.limit_in_bytes"))?,
                read(&dir.join("memory.stat")).unwrap_or_default(),
                "total_inactive_file",
            ),
            (None, None) => return Err("no hierarchy has the memory controller".into()),
        };
        let used = usage.saturating_sub(key_values(&stat).get(inactive).copied().unwrap_or(0));
        // `max` (v2) or a page-rounded i64::MAX (v1): no limit.
        let limit = limit.trim().parse::<u64>().ok().filter(|l| *l < (1 << 60));
        Ok((used, limit))
    }

    /// Processes the kernel killed in it for want of memory, since it was made.
    pub fn oom_kills(&self) -> Result<u64, String> {
        let file = match (self.unified_memory(), &self.memory) {
            (Some(dir), _) => dir.join("memory.events"),
            (None, Some(dir)) => dir.join("memory.oom_control"),
            (None, None) => return Err("no hierarchy has the memory controller".into()),
        };
        key_values(&read(&file)?)
            .get("oom_kill")
            .copied()
            .ok_or_else(|| format!("{}: no oom_kill count", file.display()))
    }

    /// Its pressure stall (`cpu`, `memory`, `io`): the unified hierarchy keeps it.
    pub fn pressure(&self, resource: &str) -> Result<f64, String> {
        let dir =
            self.unified.as_ref().ok_or("only the unified cgroup hierarchy (v2) keeps pressure stall information")?;
        let file = dir.join(format!("{resource}.pressure"));
        let text = read(&file).map_err(|e| format!("{e} (is PSI on? pressure=1 on the kernel's command line)"))?;
        pressure_some_avg10(&text).ok_or_else(|| format!("{}: no `some avg10`", file.display()))
    }
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn number(path: &Path) -> Result<u64, String> {
    read(path)?.trim().parse().map_err(|e| format!("{}: {e}", path.display()))
}

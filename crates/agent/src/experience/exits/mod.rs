//! Process exits and crashes, counted per program (docs/experience.md, "Process exits"): from
//! the kernel's own records of each process that ends, its name and wait status. The first
//! source that works here:
//! - the netlink proc connector ([`connector`]): as root, in the initial PID and user namespaces
//!   (the kernel sends its events nowhere else);
//! - process accounting ([`accounting`]): in a container, as root with CAP_SYS_PACCT, or the
//!   host's own accounting file when the `acct` package keeps one;
//! - none: `app_crashes` is absent from every sample, with the reason of each source.
//!
//! An OOM kill is a SIGKILL like any other in both sources: the kernel log ([`kmsg`]) names the
//! process it killed, where the agent may read it. Without it an OOM kill counts as a crash
//! (the device's `oom_kills` still counts it).

mod accounting;
mod connector;
mod kmsg;

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use toolgate_domain::fleet::experience::Sample;
use toolgate_domain::fleet::parts::{Breakdown, MAX_PART_NAME_BYTES, MAX_PARTS_PER_SAMPLE};

use super::sampler::Absent;

/// The device metric these counts give (the sampler gives every other).
pub const METRIC: &str = toolgate_domain::fleet::parts::EXITS_METRIC;

/// How a process ended, from its wait status (the kernel's `exit_code`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    Exited(u8),
    Signalled { signal: i32, core: bool },
}

/// Signals that ask a program to stop: a death by one of them is an ending, not a crash.
const STOP_REQUESTS: [i32; 4] = [1, 2, 13, 15]; // HUP, INT, PIPE, TERM
const SIGKILL: i32 = 9;

impl Ending {
    pub fn from_status(status: u32) -> Ending {
        match status & 0x7f {
            0 => Ending::Exited(((status >> 8) & 0xff) as u8),
            signal => Ending::Signalled { signal: signal as i32, core: status & 0x80 != 0 },
        }
    }

    pub fn is_crash(self) -> bool {
        match self {
            Ending::Exited(_) => false,
            Ending::Signalled { core: true, .. } => true,
            Ending::Signalled { signal, .. } => !STOP_REQUESTS.contains(&signal),
        }
    }
}

/// One process that ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exit {
    /// 0 where the source does not say (version 2 accounting records).
    pub pid: u32,
    pub name: String,
    pub ending: Ending,
}

/// Where exits come from.
trait Source: Send {
    /// The exits seen since the last call, waiting at most [`POLL`] for one.
    fn next(&mut self) -> std::io::Result<Vec<Exit>>;
    /// What it is, for the log.
    fn describe(&self) -> String;
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Counts {
    exits: u64,
    crashes: u64,
    oom_kills: u64,
}

/// The exits counted since the last sample took them; watched on a thread of its own.
pub struct ProcessExits {
    tally: Mutex<BTreeMap<String, Counts>>,
    /// Why no source works, when none does.
    unseen: Option<String>,
    stop: AtomicBool,
    /// Whether the agent turned process accounting on (and must turn it off when it stops).
    turned_on_accounting: bool,
}

/// How long the watching thread waits for events before it looks at `stop`.
const POLL: Duration = Duration::from_secs(1);

impl ProcessExits {
    /// Starts watching with the first source that works (accounting keeps its file in
    /// `state_dir`).
    pub fn watch(state_dir: &Path) -> Arc<ProcessExits> {
        let mut reasons = Vec::new();
        let mut turned_on_accounting = false;
        let source: Option<Box<dyn Source>> = match connector::Connector::open() {
            Ok(found) => Some(Box::new(found)),
            Err(why) => {
                reasons.push(format!("process events: {why}"));
                match accounting::Accounting::open(state_dir) {
                    Ok(found) => {
                        turned_on_accounting = found.owned();
                        Some(Box::new(found))
                    }
                    Err(why) => {
                        reasons.push(format!("process accounting: {why}"));
                        None
                    }
                }
            }
        };
        let unseen = source.is_none().then(|| format!("process exits are unseen here ({})", reasons.join("; ")));
        let exits = Arc::new(ProcessExits {
            tally: Mutex::new(BTreeMap::new()),
            unseen,
            stop: AtomicBool::new(false),
            turned_on_accounting,
        });
        let Some(source) = source else {
            tracing::warn!("experience: {}", exits.unseen.as_deref().unwrap_or_default());
            return exits;
        };
        let kernel_log = kmsg::KernelLog::open();
        match &kernel_log {
            Ok(_) => {
                tracing::info!("experience: process exits from {}, OOM kills named by /dev/kmsg", source.describe())
            }
            Err(why) => tracing::info!(
                "experience: process exits from {}; OOM kills cannot be told from other kills: {why}",
                source.describe()
            ),
        }
        let watching = exits.clone();
        let spawned = std::thread::Builder::new()
            .name("process-exits".into())
            .spawn(move || watching.run(source, kernel_log.ok()));
        if let Err(e) = spawned {
            tracing::error!("experience: cannot start watching process exits: {e}");
        }
        exits
    }

    fn run(&self, mut source: Box<dyn Source>, mut kernel_log: Option<kmsg::KernelLog>) {
        // The OOM kills the kernel log named lately (pid, name): an exit is read after the
        // log line that explains it.
        let mut oom_killed: VecDeque<(u32, String)> = VecDeque::new();
        while !self.stop.load(Ordering::Relaxed) {
            let exits = match source.next() {
                Ok(exits) => exits,
                Err(e) => {
                    tracing::warn!("experience: reading process exits from {}: {e}", source.describe());
                    std::thread::sleep(POLL);
                    continue;
                }
            };
            if exits.iter().any(|e| e.ending == Ending::Signalled { signal: SIGKILL, core: false })
                && let Some(log) = kernel_log.as_mut()
            {
                for killed in log.oom_kills() {
                    if oom_killed.len() == 64 {
                        oom_killed.pop_front();
                    }
                    oom_killed.push_back(killed);
                }
            }
            for exit in exits {
                let killed = exit.ending == Ending::Signalled { signal: SIGKILL, core: false };
                let named =
                    oom_killed.iter().position(|(pid, name)| *pid == exit.pid || (exit.pid == 0 && *name == exit.name));
                let oom = match named {
                    Some(at) if killed => oom_killed.remove(at).is_some(),
                    _ => false,
                };
                self.record(&exit, oom);
            }
        }
    }

    fn record(&self, exit: &Exit, oom_killed: bool) {
        let Ok(mut tally) = self.tally.lock() else { return };
        let name = program_name(&exit.name);
        let key = if tally.contains_key(&name) || tally.len() < MAX_PARTS_PER_SAMPLE {
            name
        } else {
            Breakdown::Apps.other().to_string()
        };
        let counts = tally.entry(key).or_default();
        counts.exits += 1;
        if oom_killed {
            counts.oom_kills += 1;
        } else if exit.ending.is_crash() {
            counts.crashes += 1;
        }
    }

    /// Puts what ended since the last call into `sample`: `app_crashes` and the programs'
    /// counts, or why `app_crashes` is unseen.
    pub fn add_to(&self, sample: &mut Sample, absent: &mut Absent) {
        if let Some(why) = &self.unseen {
            absent.insert(METRIC.into(), why.clone());
            return;
        }
        let Ok(mut tally) = self.tally.lock() else {
            absent.insert(METRIC.into(), "the count of process exits was poisoned".into());
            return;
        };
        let taken = std::mem::take(&mut *tally);
        sample.values.insert(METRIC.into(), taken.values().map(|c| c.crashes).sum::<u64>() as f64);
        for (app, counts) in taken {
            let mut values = BTreeMap::from([("exits".to_string(), counts.exits as f64)]);
            for (name, count) in [("crashes", counts.crashes), ("oom_kills", counts.oom_kills)] {
                if count > 0 {
                    values.insert(name.into(), count as f64);
                }
            }
            sample.apps.insert(app, values);
        }
    }

    /// Whether every process that ends is counted (a source works).
    pub fn counted(&self) -> bool {
        self.unseen.is_none()
    }

    /// Ends the watching thread within [`POLL`], and process accounting at once if the agent
    /// turned it on (the process may end before the thread does).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if self.turned_on_accounting {
            accounting::turn_off();
        }
    }
}

/// A process name as a sample holds it: valid UTF-8, never empty, at most
/// [`MAX_PART_NAME_BYTES`].
pub(super) fn program_name(raw: &str) -> String {
    let trimmed = raw.trim_matches(|c: char| c == '\0' || c.is_whitespace());
    if trimmed.is_empty() {
        return "(unnamed)".into();
    }
    let mut end = trimmed.len().min(MAX_PART_NAME_BYTES);
    while !trimmed.is_char_boundary(end) {
        end -= 1;
    }
    trimmed[..end].to_string()
}

#[cfg(test)]
mod tests;

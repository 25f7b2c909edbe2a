//! `host.kill_process`: processes ended with SIGTERM, then SIGKILL after a grace period. One is
//! named by PID *and* start time, so a PID the kernel gave to a later process is never hit;
//! or by a glob on names, refused when more match than the caller allowed. Never PID 1, the
//! agent itself or a kernel thread. Its plan lists what would be signalled, changing nothing.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Map, Value, json};
use toolgate_domain::fleet::compare::glob_matches;

use super::{PluginContext, text};
use crate::collect::processes::{self, Process};
use crate::collect::{Row, row};

const DEFAULT_GRACE_MS: i64 = 5_000;
const MAX_GRACE_MS: i64 = 60_000;
/// How long a process has to end after SIGKILL before it is reported as surviving it.
const AFTER_KILL: Duration = Duration::from_secs(2);

fn integer(params: &Map<String, Value>, name: &str) -> Option<i64> {
    params.get(name).and_then(Value::as_i64)
}

/// Why `p` is never signalled, if it is one of those.
fn protected(p: &Process) -> Option<&'static str> {
    if p.pid <= 1 {
        Some("PID 1, the init system")
    } else if p.pid == i64::from(std::process::id()) {
        Some("the agent itself")
    } else if p.cmdline.is_empty() && (p.ppid == 2 || p.pid == 2) {
        Some("a kernel thread")
    } else {
        None
    }
}

/// A process counts as ended once it is gone, a zombie, or its PID names a later process.
fn ended(p: &Process) -> bool {
    processes::process(p.pid).is_none_or(|now| now.start_time_ms != p.start_time_ms || now.state == "Z")
}

/// The processes the parameters name, checked; nothing is signalled on an error.
fn targets(params: &Map<String, Value>) -> Result<Vec<Process>, String> {
    let found = match (integer(params, "pid"), text(params, "name")) {
        (Some(pid), None) => {
            let Some(started) = integer(params, "start_time_ms") else {
                return Err(
                    "`pid` needs `start_time_ms` (running_processes says it): a PID alone may name a later process"
                        .into(),
                );
            };
            let Some(p) = processes::process(pid) else {
                return Err(format!("no process {pid} runs on this host (nothing was signalled)"));
            };
            if p.start_time_ms != started {
                return Err(format!(
                    "process {pid} started at {} ms, not at {started}: the PID now names a different process (nothing was signalled)",
                    p.start_time_ms
                ));
            }
            vec![p]
        }
        (None, Some(pattern)) => {
            let max = integer(params, "max_count").unwrap_or(1);
            let all = processes::all().map_err(|e| format!("cannot list the processes: {e}"))?;
            let matching: Vec<Process> = all
                .into_iter()
                .filter(|p| glob_matches(pattern.as_bytes(), p.name.as_bytes()) && protected(p).is_none())
                .collect();
            if matching.is_empty() {
                return Err(format!("no process named like `{pattern}` runs on this host (nothing to signal)"));
            }
            if matching.len() as i64 > max {
                return Err(format!(
                    "{} processes match `{pattern}`, more than max_count {max} (nothing was signalled): narrow the glob or raise max_count",
                    matching.len()
                ));
            }
            matching
        }
        _ => return Err("name the process by `pid` and `start_time_ms`, or by `name`: one of the two".into()),
    };
    if let Some((p, why)) = found.iter().find_map(|p| protected(p).map(|why| (p, why))) {
        return Err(format!("process {} ({}) is {why}: never signalled", p.pid, p.name));
    }
    Ok(found)
}

fn grace_ms(params: &Map<String, Value>) -> Result<i64, String> {
    let grace = integer(params, "grace_ms").unwrap_or(DEFAULT_GRACE_MS);
    if (0..=MAX_GRACE_MS).contains(&grace) {
        Ok(grace)
    } else {
        Err(format!("grace_ms must be 0-{MAX_GRACE_MS}, not {grace}"))
    }
}

pub fn plan(_: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let grace = grace_ms(params)?;
    let signals = format!("SIGTERM, then SIGKILL after {grace} ms");
    Ok(targets(params)?
        .into_iter()
        .map(|p| {
            row([
                ("pid", json!(p.pid)),
                ("name", json!(p.name)),
                ("start_time_ms", json!(p.start_time_ms)),
                ("uid", json!(p.uid)),
                ("cmdline", json!(p.cmdline)),
                ("signals", json!(signals)),
            ])
        })
        .collect())
}

/// Waits until every one of `list` has ended or `within` passed; those still running.
fn still_running(list: &[Process], within: Duration) -> Vec<Process> {
    let until = Instant::now() + within;
    loop {
        let running: Vec<Process> = list.iter().filter(|p| !ended(p)).cloned().collect();
        if running.is_empty() || Instant::now() >= until {
            return running;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn apply(_: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let grace = Duration::from_millis(grace_ms(params)? as u64);
    let list = targets(params)?;
    let mut outcome: Vec<(Process, &str)> = Vec::new();
    let mut signalled = Vec::new();
    for p in list {
        // Checked right before the signal: between the plan and now it may have ended.
        if ended(&p) {
            outcome.push((p, "gone"));
            continue;
        }
        match kill(Pid::from_raw(p.pid as i32), Signal::SIGTERM) {
            Ok(()) => signalled.push(p),
            Err(nix::errno::Errno::ESRCH) => outcome.push((p, "gone")),
            Err(e) => return Err(format!("cannot signal process {} ({}): {e}", p.pid, p.name)),
        }
    }
    let stubborn = still_running(&signalled, grace);
    for p in &stubborn {
        if !ended(p) {
            let _ = kill(Pid::from_raw(p.pid as i32), Signal::SIGKILL);
        }
    }
    let survivors = still_running(&stubborn, AFTER_KILL);
    for p in signalled {
        let what = match (stubborn.iter().any(|s| s.pid == p.pid), survivors.iter().any(|s| s.pid == p.pid)) {
            (false, _) => "terminated",
            (true, false) => "killed",
            (true, true) => "survived",
        };
        outcome.push((p, what));
    }
    outcome.sort_by_key(|(p, _)| p.pid);
    Ok(outcome
        .into_iter()
        .map(|(p, what)| row([("pid", json!(p.pid)), ("name", json!(p.name)), ("outcome", json!(what))]))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn a_child_is_planned_then_terminated_and_a_wrong_start_time_is_refused() {
        let mut child = std::process::Command::new("sleep").arg("300").spawn().unwrap();
        let pid = i64::from(child.id());
        let started = processes::process(pid).unwrap().start_time_ms;
        let ctx = PluginContext::new(std::env::temp_dir());
        let wrong = plan(&ctx, &params(json!({"pid": pid, "start_time_ms": started - 10_000}))).unwrap_err();
        assert!(wrong.contains("different process"), "{wrong}");
        let by_pid = params(json!({"pid": pid, "start_time_ms": started, "grace_ms": 2000}));
        let planned = plan(&ctx, &by_pid).unwrap();
        assert_eq!((planned[0]["pid"].as_i64(), planned[0]["name"].as_str()), (Some(pid), Some("sleep")));
        let done = apply(&ctx, &by_pid);
        let _ = child.wait();
        assert_eq!(done.unwrap()[0]["outcome"], "terminated");
    }

    #[test]
    fn protected_processes_and_broad_globs_are_refused() {
        let ctx = PluginContext::new(std::env::temp_dir());
        let me = processes::process(i64::from(std::process::id())).unwrap();
        let own = params(json!({"pid": me.pid, "start_time_ms": me.start_time_ms}));
        assert!(plan(&ctx, &own).unwrap_err().contains("the agent itself"));
        let mut children: Vec<_> =
            (0..2).map(|_| std::process::Command::new("sleep").arg("300").spawn().unwrap()).collect();
        let broad = plan(&ctx, &params(json!({"name": "sleep", "max_count": 1}))).unwrap_err();
        assert!(broad.contains("more than max_count 1"), "{broad}");
        for child in &mut children {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert!(plan(&ctx, &params(json!({"name": "no-such-process-*"}))).unwrap_err().contains("no process named"));
    }
}

//! Running orders, at most once per changing step. Before a changing step runs, the agent
//! writes "started" to `STATE_DIR/runs/<execution_id>.json` and flushes it; after, the outcome.
//! An order that comes again (the server restarted, the connection dropped) is answered from
//! that file: a finished step's outcome, or `failed: interrupted` for a step that started but
//! never recorded an outcome (the agent died in between). Read-only steps simply run again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toolgate_domain::fleet::instruction::{ActionClass, StepStatus};
use toolgate_domain::fleet::wire::{MAX_FRAME_BYTES, RunOrder, RunResult, RunStep, StepMode, StepResult, plan_digest};
use toolgate_domain::records::KillSwitch;

use crate::collect::Row;
use crate::plugins::reboot::{self, Boot};
use crate::plugins::{self, PluginContext};
use crate::state::{self, Quarantine};

const RUNS_DIR: &str = "runs";
/// Journals older than this are removed at start (no execution's deadline is that far).
const KEEP_JOURNALS: Duration = Duration::from_secs(7 * 24 * 3600);
/// A result larger than this could not be uploaded in one frame: the step fails instead.
const MAX_RESULT_BYTES: usize = MAX_FRAME_BYTES / 4 * 3;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
enum Entry {
    Started,
    /// A reboot was asked for in boot `from`: the step ends in another boot.
    AwaitingReboot {
        from: Boot,
    },
    Done {
        result: StepResult,
    },
}

fn runs_dir(state_dir: &Path) -> PathBuf {
    state_dir.join(RUNS_DIR)
}

/// An execution id is `exe-` and hex digits: anything else never becomes a file name.
fn journal_name(execution_id: &str) -> Result<String, String> {
    let hex = execution_id.strip_prefix("exe-").unwrap_or("");
    if hex.is_empty() || hex.len() > 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("`{execution_id}` is not an execution id"));
    }
    Ok(format!("{execution_id}.json"))
}

struct Journal {
    dir: PathBuf,
    name: String,
    entries: BTreeMap<usize, Entry>,
}

impl Journal {
    fn open(state_dir: &Path, execution_id: &str) -> Result<Self, String> {
        let name = journal_name(execution_id)?;
        let dir = runs_dir(state_dir);
        let entries = match std::fs::read_to_string(dir.join(&name)) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| format!("the run journal {name} is damaged: {e}"))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(format!("cannot read the run journal {name}: {e}")),
        };
        Ok(Self { dir, name, entries })
    }

    fn record(&mut self, step: usize, entry: Entry) -> Result<(), String> {
        self.entries.insert(step, entry);
        let text = serde_json::to_vec(&self.entries).map_err(|e| e.to_string())?;
        state::write_durably(&self.dir, &self.name, &text).map_err(|e| format!("cannot write the run journal: {e}"))
    }
}

fn failed(status: StepStatus, error: impl Into<String>) -> StepResult {
    StepResult { status, error: Some(error.into()), rows: Vec::new() }
}

/// What stands in a result where a secret's value was.
pub const SCRUBBED: &str = "[secret]";

/// Runs one step with the secrets and configuration it was given, and answers its result with every one of
/// their values replaced (an action that echoes a secret, or an error quoting one, leaks
/// nothing into the journal or the answer).
fn run_step(ctx: &PluginContext, step: &RunStep) -> StepResult {
    let mut ctx = ctx.clone();
    ctx.secrets = step.secrets.clone();
    ctx.config = step.config.clone();
    let result = run_action(&ctx, step);
    let values: Vec<&str> = step.secrets.0.values().map(String::as_str).filter(|v| !v.is_empty()).collect();
    if values.is_empty() {
        return result;
    }
    let scrub = |text: &str| values.iter().fold(text.to_string(), |t, v| t.replace(v, SCRUBBED));
    let mut result = result;
    result.error = result.error.as_deref().map(scrub);
    for row in &mut result.rows {
        for value in row.values_mut() {
            scrub_value(value, &scrub);
        }
    }
    result
}

/// Every string in `value`, keys too, through `scrub`.
fn scrub_value(value: &mut serde_json::Value, scrub: &dyn Fn(&str) -> String) {
    match value {
        serde_json::Value::String(text) => *text = scrub(text),
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| scrub_value(v, scrub)),
        serde_json::Value::Object(map) => {
            let entries = std::mem::take(map);
            for (key, mut v) in entries {
                scrub_value(&mut v, scrub);
                map.insert(scrub(&key), v);
            }
        }
        _ => {}
    }
}

/// Runs one step's action on a thread of its own, waiting at most its timeout.
fn run_action(ctx: &PluginContext, step: &RunStep) -> StepResult {
    let (ctx, owned) = (ctx.clone(), step.clone());
    bounded(step, move || match owned.mode {
        StepMode::Apply => plugins::run(&ctx, &owned.plugin, &owned.action, &owned.params),
        StepMode::Plan => plugins::plan(&ctx, &owned.plugin, &owned.action, &owned.params),
    })
}

/// Runs `work` on a thread of its own and answers its rows as the step's result, waiting at
/// most the step's timeout.
fn bounded(step: &RunStep, work: impl FnOnce() -> Result<Vec<Row>, String> + Send + 'static) -> StepResult {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    match rx.recv_timeout(Duration::from_millis(step.timeout_ms.max(1))) {
        Ok(Ok(rows)) => {
            let size: usize = rows.iter().map(|r| serde_json::to_vec(r).map_or(0, |v| v.len())).sum();
            if size > MAX_RESULT_BYTES {
                return failed(
                    StepStatus::Failed,
                    format!("the result is too large ({} rows, {size} bytes): narrow the parameters", rows.len()),
                );
            }
            StepResult { status: StepStatus::Succeeded, error: None, rows }
        }
        Ok(Err(message)) => failed(StepStatus::Failed, message),
        Err(_) => {
            failed(StepStatus::TimedOut, format!("{} did not finish within {} ms", step.definition, step.timeout_ms))
        }
    }
}

/// Runs `order`'s steps in turn, but none that `quarantine` or an engaged switch of
/// `kill_switches` forbids (those fail, saying why, and the steps after them are skipped).
pub fn execute(
    ctx: &PluginContext,
    order: &RunOrder,
    quarantine: &Quarantine,
    kill_switches: &[KillSwitch],
) -> RunResult {
    let mut journal = match Journal::open(&ctx.state_dir, &order.execution_id) {
        Ok(journal) => Some(journal),
        Err(e) => {
            tracing::error!("{e}");
            None
        }
    };
    let mut steps = Vec::with_capacity(order.steps.len());
    let mut stopped = false;
    for (i, step) in order.steps.iter().enumerate() {
        let journaled = step.class == ActionClass::Change && step.mode.is_apply();
        let result = if stopped {
            failed(StepStatus::Skipped, "an earlier step did not succeed")
        } else if let Some(answer) = journaled.then(|| answer_from(step, i, journal.as_mut())).flatten() {
            // What ran already is answered as it ended, whatever has been engaged since.
            answer
        } else if quarantine.quarantined && !step.diagnostic && step.mode.is_apply() {
            failed(StepStatus::Failed, "quarantined: this agent runs only diagnostic instructions until it is released")
        } else if let Some(switch) = kill_switches.iter().find(|s| s.stops(&step.plugin, &step.action)) {
            failed(StepStatus::Failed, switch.refusal())
        } else if step.class == ActionClass::Read || step.mode == StepMode::Plan {
            // A plan changes nothing: like a read, it is neither journaled nor held by quarantine.
            run_step(ctx, step)
        } else {
            run_change(ctx, step, i, journal.as_mut())
        };
        stopped = result.status != StepStatus::Succeeded;
        steps.push(result);
    }
    RunResult { execution_id: order.execution_id.clone(), steps }
}

fn run_change(ctx: &PluginContext, step: &RunStep, i: usize, journal: Option<&mut Journal>) -> StepResult {
    let Some(journal) = journal else {
        return failed(StepStatus::Failed, "the run journal cannot be read: a change is never run without it");
    };
    let started = match plugins::reboots(&step.plugin, &step.action) {
        false => Entry::Started,
        true => match reboot::this_boot() {
            Ok(from) => Entry::AwaitingReboot { from },
            Err(e) => return failed(StepStatus::Failed, format!("not run: {e}")),
        },
    };
    if let Err(e) = journal.record(i, started) {
        return failed(StepStatus::Failed, format!("not run: {e}"));
    }
    let result = match &step.approved_plan {
        Some(approved) => apply_as_approved(ctx, step, approved),
        None => {
            tracing::info!(definition = %step.definition, "running a change ({}.{})", step.plugin, step.action);
            run_step(ctx, step)
        }
    };
    if let Err(e) = journal.record(i, Entry::Done { result: result.clone() }) {
        // The change ran; a repeated order will say `interrupted`, never run it twice.
        tracing::error!("{e}");
    }
    result
}

/// A change step's answer from the journal when it has started before: its outcome, or
/// `interrupted` when it never recorded one; a reboot asked for ends once the host is in
/// another boot (until then the step waits for it again). None: it never started.
fn answer_from(step: &RunStep, i: usize, journal: Option<&mut Journal>) -> Option<StepResult> {
    let journal = journal?;
    let result = match journal.entries.get(&i)? {
        Entry::Done { result } => return Some(result.clone()),
        Entry::Started => failed(
            StepStatus::Failed,
            "interrupted: the agent stopped after this change started and before its outcome was recorded; it is not run again",
        ),
        Entry::AwaitingReboot { from } => match reboot::this_boot() {
            Ok(now) if now.boot_id != from.boot_id => {
                tracing::info!(definition = %step.definition, "back from the reboot");
                StepResult { status: StepStatus::Succeeded, error: None, rows: reboot::came_back(from, &now) }
            }
            Ok(_) => {
                let delay = reboot::delay_of(&step.params);
                bounded(step, move || reboot::wait_to_go_down(delay))
            }
            Err(e) => failed(StepStatus::Failed, format!("cannot tell whether the host rebooted: {e}")),
        },
    };
    if let Err(e) = journal.record(i, Entry::Done { result: result.clone() }) {
        tracing::error!("{e}");
    }
    Some(result)
}

/// Plans the change again and applies it only when the plan is still the one a person
/// approved; otherwise changes nothing and answers the new plan (`plan_changed`).
fn apply_as_approved(ctx: &PluginContext, step: &RunStep, approved: &str) -> StepResult {
    let planned = run_step(ctx, &RunStep { mode: StepMode::Plan, ..step.clone() });
    if planned.status != StepStatus::Succeeded {
        let why = planned.error.unwrap_or_default();
        return failed(planned.status, format!("not applied: it could not be planned again ({why})"));
    }
    if plan_digest(&planned.rows) != approved {
        tracing::info!(definition = %step.definition, "the plan changed since it was approved: nothing is changed");
        return StepResult {
            status: StepStatus::PlanChanged,
            error: Some(
                "the plan changed since it was approved, so nothing was changed: the rows are the new plan".into(),
            ),
            rows: planned.rows,
        };
    }
    tracing::info!(definition = %step.definition, "running an approved change ({}.{})", step.plugin, step.action);
    run_step(ctx, step)
}

/// Removes journals older than a week.
pub fn prune(state_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(runs_dir(state_dir)) else { return };
    for entry in entries.flatten() {
        let old = entry.metadata().and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok());
        if old.is_some_and(|age| age > KEEP_JOURNALS) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
#[path = "journal_tests.rs"]
mod tests;

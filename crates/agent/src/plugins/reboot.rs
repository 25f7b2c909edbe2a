//! `host.reboot`: the host restarted with `shutdown -r +MINUTES MESSAGE` (systemd-logind tells
//! logged-in users, and keeps the schedule whatever happens to the agent). The step does not
//! end on this boot: the journal keeps the boot it started from ([`crate::journal`]) and the
//! host going down ends the agent; when the server sends the run again after the new boot,
//! the journal answers it with both boots. Its plan is the boot it would end and what users
//! would be told.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::systemd::require_systemd;
use super::{PluginContext, output, text};
use crate::collect::{Row, processes, row};

/// The longest delay: a reboot further off is a maintenance window, not a change to approve now.
const MAX_DELAY_MINUTES: u64 = 30;
const DEFAULT_DELAY_MINUTES: u64 = 1;
const MAX_MESSAGE_CHARS: usize = 200;
const DEFAULT_MESSAGE: &str = "This host reboots at an administrator's request (toolgate).";
/// How long after the scheduled time the host has to go down before the step says it did not.
const GO_DOWN_GRACE: Duration = Duration::from_secs(120);

/// One boot of this host: the kernel's boot id (per container under systemd-nspawn, which
/// gives each boot its own) and when its init started.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Boot {
    pub boot_id: String,
    pub booted_at_ms: i64,
}

/// The boot this host is in now.
pub fn this_boot() -> Result<Boot, String> {
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map_err(|e| format!("cannot read this boot's id (/proc/sys/kernel/random/boot_id): {e}"))?
        .trim()
        .to_string();
    let init = processes::process(1).ok_or("cannot read when this boot began (/proc/1/stat)")?;
    Ok(Boot { boot_id, booted_at_ms: init.start_time_ms })
}

/// The delay and message asked for, checked (a message goes to every terminal: one line of
/// printable text).
fn asked(params: &Map<String, Value>) -> Result<(u64, &str), String> {
    let delay = match params.get("delay_minutes") {
        None => DEFAULT_DELAY_MINUTES,
        Some(v) => v
            .as_u64()
            .filter(|d| *d <= MAX_DELAY_MINUTES)
            .ok_or_else(|| format!("`delay_minutes` must be a whole number from 0 to {MAX_DELAY_MINUTES}"))?,
    };
    let message = text(params, "message").unwrap_or(DEFAULT_MESSAGE);
    if message.is_empty() || message.chars().count() > MAX_MESSAGE_CHARS || message.chars().any(char::is_control) {
        return Err(format!("`message` must be one line of 1 to {MAX_MESSAGE_CHARS} printable characters"));
    }
    Ok((delay, message))
}

pub fn plan(_: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let (delay, message) = asked(params)?;
    require_systemd()?;
    let boot = this_boot()?;
    Ok(vec![row([
        ("boot_id", json!(boot.boot_id)),
        ("booted_at_ms", json!(boot.booted_at_ms)),
        ("delay_minutes", json!(delay)),
        ("message", json!(message)),
    ])])
}

/// Schedules the reboot and waits for the host to go down, which ends this process; an
/// answer from here is a reboot that did not happen.
pub fn apply(_: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let (delay, message) = asked(params)?;
    require_systemd()?;
    tracing::warn!(delay_minutes = delay, "rebooting this host");
    output("shutdown", &["-r", &format!("+{delay}"), message])?;
    wait_to_go_down(delay)
}

/// Waits for a reboot scheduled `delay_minutes` ago at most (an agent restarted before it,
/// in the same boot, waits again).
pub fn wait_to_go_down(delay_minutes: u64) -> Result<Vec<Row>, String> {
    let waited = Duration::from_secs(delay_minutes * 60) + GO_DOWN_GRACE;
    std::thread::sleep(waited);
    Err(format!(
        "the reboot was scheduled but the host had not gone down {} s later: it was cancelled (shutdown -c) or refused",
        waited.as_secs()
    ))
}

/// The delay a step asked for (for [`wait_to_go_down`] after a restart of the agent).
pub fn delay_of(params: &Map<String, Value>) -> u64 {
    asked(params).map_or(DEFAULT_DELAY_MINUTES, |(delay, _)| delay)
}

/// The step's outcome once the host is in a boot other than `from`.
pub fn came_back(from: &Boot, now: &Boot) -> Vec<Row> {
    vec![row([
        ("previous_boot_id", json!(from.boot_id)),
        ("boot_id", json!(now.boot_id)),
        ("booted_at_ms", json!(now.booted_at_ms)),
    ])]
}

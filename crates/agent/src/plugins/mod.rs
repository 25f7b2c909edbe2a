//! The agent's plugins: the code behind each action its manifests (`crates/agent/plugins/*.yaml`)
//! declare. An action reads its parameters (already checked by the server against the
//! definition's schema, and checked again here where a wrong value could do harm) and returns
//! rows of the declared columns, or an error saying what went wrong on this host.

mod disk;
mod files;
pub(crate) mod guard;
mod host;
mod kill;
mod managed;
mod packages;
pub(crate) mod reboot;
mod service_action;
mod systemd;
mod updates;
pub mod upload;
mod workspace;

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::collect::{Row, output};

/// Where `files.tail` reads: the host's logs.
pub const LOG_ROOT: &str = "/var/log";

/// What an action may touch besides the host it reads.
#[derive(Clone, Debug)]
pub struct PluginContext {
    /// The agent's state dir: `workspace` changes only `STATE_DIR/work`, and no action
    /// reads it ([`guard`]).
    pub state_dir: PathBuf,
    /// Where `files.tail` may read ([`LOG_ROOT`]; a test's own directory in tests).
    pub log_root: PathBuf,
    /// The plugin secrets the running step was given (docs/secrets.md): only for the step,
    /// never written anywhere by the agent.
    pub secrets: toolgate_domain::fleet::wire::SecretValues,
    /// The plugin configuration the running step's action declares, as set when the run was
    /// sent (set_plugin_config); a key never set is absent.
    pub config: std::collections::BTreeMap<String, String>,
    /// Where `files.collect` sends what a grant asks for (the server, over a connection of
    /// its own); None where there is no server (tests of other actions).
    pub uploads: Option<upload::Uploads>,
}

impl PluginContext {
    pub fn new(state_dir: PathBuf) -> Self {
        PluginContext {
            state_dir,
            log_root: PathBuf::from(LOG_ROOT),
            secrets: Default::default(),
            config: Default::default(),
            uploads: None,
        }
    }

    pub fn work_dir(&self) -> PathBuf {
        self.state_dir.join("work")
    }
}

type ActionFn = fn(&PluginContext, &Map<String, Value>) -> Result<Vec<Row>, String>;

/// One action this agent implements: what it does, and for a change its plan (what it would
/// do, computed changing nothing).
struct Implemented {
    plugin: &'static str,
    action: &'static str,
    run: ActionFn,
    plan: Option<ActionFn>,
    /// Ends with the host going down: its outcome is answered from the next boot
    /// ([`crate::journal`]).
    reboots: bool,
}

const fn read(plugin: &'static str, action: &'static str, run: ActionFn) -> Implemented {
    Implemented { plugin, action, run, plan: None, reboots: false }
}

const fn change(plugin: &'static str, action: &'static str, run: ActionFn, plan: ActionFn) -> Implemented {
    Implemented { plugin, action, run, plan: Some(plan), reboots: false }
}

const fn rebooting(plugin: &'static str, action: &'static str, run: ActionFn, plan: ActionFn) -> Implemented {
    Implemented { plugin, action, run, plan: Some(plan), reboots: true }
}

/// Every (plugin, action) this agent implements; a test holds it equal to the manifests.
const ACTIONS: &[Implemented] = &[
    read("host", "facts", host::facts),
    read("host", "disk_usage", host::disk_usage),
    read("host", "processes", host::processes),
    read("host", "listening_ports", host::listening_ports),
    read("host", "installed_software", host::installed_software),
    change("host", "kill_process", kill::apply, kill::plan),
    change("host", "free_disk_space", disk::apply, disk::plan),
    rebooting("host", "reboot", reboot::apply, reboot::plan),
    read("systemd", "service_status", systemd::service_status),
    read("systemd", "failed_units", systemd::failed_units),
    read("systemd", "journal_tail", systemd::journal_tail),
    change("systemd", "service_action", service_action::apply, service_action::plan),
    change("packages", "install", packages::install, packages::install_plan),
    change("packages", "upgrade", packages::upgrade, packages::upgrade_plan),
    change("packages", "remove", packages::remove, packages::remove_plan),
    change("packages", "apply_updates", packages::apply_updates, packages::apply_updates_plan),
    read("updates", "pending_updates", updates::pending_updates),
    read("updates", "reboot_required", updates::reboot_required),
    read("files", "sha256", files::sha256),
    read("files", "tail", files::tail),
    read("files", "collect", upload::collect),
    change("files", "managed_line", managed::apply, managed::plan),
    change("files", "restore_backup", managed::restore, managed::restore_plan),
    change("workspace", "append_line", workspace::append_line, workspace::append_line_plan),
    change("workspace", "write_marker", workspace::write_marker, workspace::write_marker_plan),
    change("workspace", "clear_cache", workspace::clear_cache, workspace::clear_cache_plan),
    change("workspace", "secret_digest", workspace::secret_digest, workspace::secret_digest_plan),
];

/// The (plugin, action) pairs this agent implements, and whether each has a plan.
pub fn implemented() -> Vec<(&'static str, &'static str, bool)> {
    ACTIONS.iter().map(|a| (a.plugin, a.action, a.plan.is_some())).collect()
}

fn find(plugin: &str, action: &str) -> Result<&'static Implemented, String> {
    ACTIONS
        .iter()
        .find(|a| a.plugin == plugin && a.action == action)
        .ok_or_else(|| format!("this agent has no action `{plugin}.{action}` (an older agent? upgrade it)"))
}

/// Whether the action reboots the host (its step ends in the next boot).
pub fn reboots(plugin: &str, action: &str) -> bool {
    find(plugin, action).is_ok_and(|a| a.reboots)
}

/// Runs one action on this host.
pub fn run(ctx: &PluginContext, plugin: &str, action: &str, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    (find(plugin, action)?.run)(ctx, params)
}

/// Plans one change on this host: what it would do, changing nothing.
pub fn plan(ctx: &PluginContext, plugin: &str, action: &str, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    match find(plugin, action)?.plan {
        Some(plan) => plan(ctx, params),
        None => Err(format!("`{plugin}.{action}` is a read: it has no plan (it changes nothing)")),
    }
}

fn text<'a>(params: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    params.get(name).and_then(Value::as_str)
}

fn required_text<'a>(params: &'a Map<String, Value>, name: &str) -> Result<&'a str, String> {
    text(params, name).ok_or_else(|| format!("parameter `{name}` (a string) is required"))
}

/// A file name without directories: what `workspace` accepts.
fn plain_file_name(name: &str) -> Result<&str, String> {
    let plain = !name.is_empty()
        && name.len() <= 128
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if plain { Ok(name) } else { Err(format!("`{name}` is not a plain file name (letters, digits, . _ -)")) }
}

fn absolute(path: &str) -> Result<&Path, String> {
    let path = Path::new(path);
    if path.is_absolute() { Ok(path) } else { Err(format!("`{}` is not an absolute path", path.display())) }
}

#[cfg(test)]
mod tests;

//! The agent's plugins: the code behind each action its manifests (`crates/agent/plugins/*.yaml`)
//! declare. An action reads its parameters (already checked by the server against the
//! definition's schema, and checked again here where a wrong value could do harm) and returns
//! rows of the declared columns, or an error saying what went wrong on this host.

mod files;
pub(crate) mod guard;
mod host;
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

/// Every (plugin, action) this agent implements; a test holds it equal to the manifests.
const ACTIONS: &[(&str, &str, ActionFn)] = &[
    ("host", "facts", host::facts),
    ("host", "disk_usage", host::disk_usage),
    ("host", "processes", host::processes),
    ("host", "listening_ports", host::listening_ports),
    ("host", "installed_software", host::installed_software),
    ("systemd", "service_status", systemd::service_status),
    ("systemd", "failed_units", systemd::failed_units),
    ("systemd", "journal_tail", systemd::journal_tail),
    ("updates", "pending_updates", updates::pending_updates),
    ("updates", "reboot_required", updates::reboot_required),
    ("files", "sha256", files::sha256),
    ("files", "tail", files::tail),
    ("files", "collect", upload::collect),
    ("workspace", "append_line", workspace::append_line),
    ("workspace", "write_marker", workspace::write_marker),
    ("workspace", "clear_cache", workspace::clear_cache),
    ("workspace", "secret_digest", workspace::secret_digest),
];

/// The (plugin, action) pairs this agent implements.
pub fn implemented() -> Vec<(&'static str, &'static str)> {
    ACTIONS.iter().map(|(p, a, _)| (*p, *a)).collect()
}

/// Runs one action on this host.
pub fn run(ctx: &PluginContext, plugin: &str, action: &str, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let Some((_, _, run)) = ACTIONS.iter().find(|(p, a, _)| *p == plugin && *a == action) else {
        return Err(format!("this agent has no action `{plugin}.{action}` (an older agent? upgrade it)"));
    };
    run(ctx, params)
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

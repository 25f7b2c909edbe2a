//! The agent's state dir: its identity after enrollment, readable by its owner only.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toolgate_domain::records::KillSwitch;

use crate::AgentError;

pub const STATE_FILE: &str = "agent.json";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The server it enrolled with (its credential is good there only).
    pub server: String,
    pub agent_id: String,
    pub credential: String,
}

fn state_error(path: &Path, e: impl std::fmt::Display) -> AgentError {
    AgentError::State { path: path.to_path_buf(), message: e.to_string() }
}

pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join(STATE_FILE)
}

/// The identity kept in `state_dir`, if the agent has enrolled.
pub fn load(state_dir: &Path) -> Result<Option<Identity>, AgentError> {
    let path = path(state_dir);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| state_error(&path, format!("is not an agent state file ({e}); move it away to enroll again"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(state_error(&path, e)),
    }
}

/// Writes the identity (mode 0600, in a 0700 dir), durably.
pub fn save(state_dir: &Path, identity: &Identity) -> Result<(), AgentError> {
    let text = serde_json::to_string_pretty(identity).map_err(|e| state_error(&path(state_dir), e))?;
    write_durably(state_dir, STATE_FILE, text.as_bytes())
}

/// Writes `dir/name` (mode 0600, in a 0700 dir) through a temporary file and a rename, both
/// flushed to disk, so a crash leaves the old file or the new one, never half of one, and a
/// file this returns for survives a power cut.
pub fn write_durably(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), AgentError> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| state_error(dir, e))?;
    let path = dir.join(name);
    let temporary = dir.join(format!(".{name}.tmp"));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .map_err(|e| state_error(&temporary, e))?;
    // The mode given to open() applies only when the file is created.
    file.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(|e| state_error(&temporary, e))?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(|e| state_error(&temporary, e))?;
    std::fs::rename(&temporary, &path).map_err(|e| state_error(&path, e))?;
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| state_error(dir, e))
}

/// The quarantine state the agent keeps across restarts (`quarantine.json`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quarantine {
    pub quarantined: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

pub const QUARANTINE_FILE: &str = "quarantine.json";

/// The JSON file `name` of the state dir, `what` it is; its default while there is none.
fn load_kept<T: serde::de::DeserializeOwned + Default>(
    state_dir: &Path,
    name: &str,
    what: &str,
) -> Result<T, AgentError> {
    let path = state_dir.join(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| state_error(&path, format!("is not {what} ({e})"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(e) => Err(state_error(&path, e)),
    }
}

pub fn load_quarantine(state_dir: &Path) -> Result<Quarantine, AgentError> {
    load_kept(state_dir, QUARANTINE_FILE, "a quarantine state file")
}

pub fn save_quarantine(state_dir: &Path, quarantine: &Quarantine) -> Result<(), AgentError> {
    let text = serde_json::to_string(quarantine).map_err(|e| state_error(state_dir, e))?;
    write_durably(state_dir, QUARANTINE_FILE, text.as_bytes())
}

/// The plugin kill switches the server last sent (`kill-switches.json`): kept across restarts,
/// so that a killed action is refused even from a server that has not heard of the switch.
pub const KILL_SWITCHES_FILE: &str = "kill-switches.json";

pub fn load_kill_switches(state_dir: &Path) -> Result<Vec<KillSwitch>, AgentError> {
    load_kept(state_dir, KILL_SWITCHES_FILE, "a kill-switch file")
}

pub fn save_kill_switches(state_dir: &Path, switches: &[KillSwitch]) -> Result<(), AgentError> {
    let text = serde_json::to_string(switches).map_err(|e| state_error(state_dir, e))?;
    write_durably(state_dir, KILL_SWITCHES_FILE, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_owner_only_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        assert_eq!(load(&state).unwrap(), None);
        let identity = Identity { server: "http://h".into(), agent_id: "agt-1".into(), credential: "tga_x".into() };
        save(&state, &identity).unwrap();
        assert_eq!(load(&state).unwrap(), Some(identity));
        let mode = std::fs::metadata(path(&state)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::write(path(&state), "garbage").unwrap();
        assert!(load(&state).unwrap_err().to_string().contains("is not an agent state file"));
    }
}

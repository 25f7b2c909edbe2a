//! An agent as the server knows it: its identity, its host's facts and its status.

use serde::{Deserialize, Serialize};

use crate::secrets::random_hex;

/// The prefix of every agent id; the rest is 16 hex digits chosen at enrollment.
pub const AGENT_ID_PREFIX: &str = "agt-";
/// The prefix of an enrollment token's secret (what an operator hands to a new endpoint).
pub const ENROLL_SECRET_PREFIX: &str = "tge_";
/// The prefix of an agent's own credential (kept in its state dir).
pub const AGENT_SECRET_PREFIX: &str = "tga_";

pub fn new_agent_id() -> String {
    format!("{AGENT_ID_PREFIX}{}", random_hex::<8>())
}

/// Whether `text` has the shape of an agent id (`agt-` and 16 lowercase hex digits).
pub fn is_agent_id(text: &str) -> bool {
    text.strip_prefix(AGENT_ID_PREFIX)
        .is_some_and(|hex| hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// What an agent reads off its host and reports on every connection and refresh.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostFacts {
    pub hostname: String,
    /// `NAME` from /etc/os-release, e.g. "Debian GNU/Linux".
    pub os_name: String,
    /// `ID` from /etc/os-release, e.g. "debian".
    pub os_id: String,
    /// `VERSION_ID` from /etc/os-release, e.g. "12".
    pub os_version: String,
    /// `PRETTY_NAME` from /etc/os-release.
    pub os_pretty_name: String,
    /// The running kernel's release (`uname -r`).
    pub kernel: String,
    /// The machine's architecture (`uname -m`).
    pub arch: String,
    pub cpu_model: String,
    pub cpu_count: u32,
    pub memory_total_bytes: u64,
    pub memory_available_bytes: u64,
    pub uptime_secs: u64,
    /// Unix seconds.
    pub boot_time: i64,
    pub ip_addresses: Vec<String>,
    pub disks: Vec<Disk>,
    pub agent_version: String,
    /// The init system: `systemd` where it runs, else PID 1's name (`init`, `tini`, ...);
    /// empty from agents older than this field.
    #[serde(default)]
    pub init_system: String,
    /// Whether the host waits for a reboot (Debian's /run/reboot-required).
    #[serde(default)]
    pub reboot_required: bool,
    /// The machine's model as its firmware names it (DMI `product_name`); empty where the
    /// host has no DMI (a VM without it, a container) or from agents older than this field.
    #[serde(default)]
    pub model: String,
}

impl HostFacts {
    /// The values of scope attribute `name` these facts hold (several for `ip`; none for an
    /// attribute that is not a fact, or an empty one).
    pub fn attribute(&self, name: &str) -> Vec<String> {
        let one = |v: &str| if v.is_empty() { vec![] } else { vec![v.to_string()] };
        match name {
            "hostname" => one(&self.hostname),
            "os.name" => one(&self.os_name),
            "os.id" => one(&self.os_id),
            "os.version" => one(&self.os_version),
            "kernel" => one(&self.kernel),
            "arch" => one(&self.arch),
            "agent.version" => one(&self.agent_version),
            "cpu.count" => vec![self.cpu_count.to_string()],
            "memory.total" => vec![self.memory_total_bytes.to_string()],
            "ip" => self.ip_addresses.clone(),
            _ => vec![],
        }
    }
}

/// The largest facts frame the server takes, in bytes: a host's facts are a few KiB; the
/// server keeps every agent's in memory, so they are bounded, field by field and in all.
pub const MAX_FACTS_BYTES: usize = 64 * 1024;
/// The longest text field of the facts (a DNS name is at most 253 bytes).
const MAX_FACT_TEXT_BYTES: usize = 256;
/// The most addresses and disks the facts may list.
const MAX_FACT_ITEMS: usize = 256;
/// The longest mount point of a disk.
const MAX_MOUNT_BYTES: usize = 1024;

impl HostFacts {
    /// Whether every field is within its bound; Err names the first that is not.
    pub fn check(&self) -> Result<(), String> {
        let texts = [
            ("hostname", &self.hostname),
            ("os_name", &self.os_name),
            ("os_id", &self.os_id),
            ("os_version", &self.os_version),
            ("os_pretty_name", &self.os_pretty_name),
            ("kernel", &self.kernel),
            ("arch", &self.arch),
            ("cpu_model", &self.cpu_model),
            ("agent_version", &self.agent_version),
            ("model", &self.model),
        ];
        for (name, value) in texts {
            bounded(name, value, MAX_FACT_TEXT_BYTES)?;
        }
        if self.ip_addresses.len() > MAX_FACT_ITEMS || self.disks.len() > MAX_FACT_ITEMS {
            return Err(format!("facts list at most {MAX_FACT_ITEMS} addresses and {MAX_FACT_ITEMS} disks"));
        }
        for address in &self.ip_addresses {
            bounded("ip_addresses[]", address, 64)?;
        }
        for disk in &self.disks {
            bounded("disks[].mount", &disk.mount, MAX_MOUNT_BYTES)?;
            bounded("disks[].filesystem", &disk.filesystem, 64)?;
        }
        Ok(())
    }
}

impl HostFacts {
    /// The facts cut to their bounds (what an agent sends, so that a host with an odd os-release
    /// or many addresses is still heard): texts cut at a character boundary, lists shortened.
    pub fn clipped(mut self) -> Self {
        for text in [
            &mut self.hostname,
            &mut self.os_name,
            &mut self.os_id,
            &mut self.os_version,
            &mut self.os_pretty_name,
            &mut self.kernel,
            &mut self.arch,
            &mut self.cpu_model,
            &mut self.agent_version,
            &mut self.model,
        ] {
            clip(text, MAX_FACT_TEXT_BYTES);
        }
        self.ip_addresses.truncate(MAX_FACT_ITEMS);
        self.ip_addresses.iter_mut().for_each(|a| clip(a, 64));
        self.disks.truncate(MAX_FACT_ITEMS);
        for disk in &mut self.disks {
            clip(&mut disk.mount, MAX_MOUNT_BYTES);
            clip(&mut disk.filesystem, 64);
        }
        self
    }
}

fn clip(text: &mut String, max: usize) {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
}

fn bounded(name: &str, value: &str, max: usize) -> Result<(), String> {
    match value.len() <= max {
        true => Ok(()),
        false => Err(format!("facts field `{name}` is {} bytes, more than the {max} it may be", value.len())),
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disk {
    pub mount: String,
    pub filesystem: String,
    pub size_bytes: u64,
    pub free_bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    /// Connected, and heard from within the heartbeat window.
    Online,
    /// Enrolled, but not connected or silent past the heartbeat window.
    Offline,
    /// Its credential was revoked: it cannot connect again without a new enrollment.
    Revoked,
}

impl AgentStatus {
    pub const ALL: [AgentStatus; 3] = [AgentStatus::Online, AgentStatus::Offline, AgentStatus::Revoked];

    pub fn as_str(self) -> &'static str {
        match self {
            AgentStatus::Online => "online",
            AgentStatus::Offline => "offline",
            AgentStatus::Revoked => "revoked",
        }
    }
}

/// One agent as listed: identity, status and its host's facts (None until it first reported).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgentSummary {
    pub agent_id: String,
    pub status: AgentStatus,
    /// Unix ms.
    pub enrolled_at_ms: i64,
    /// Unix ms of the last message from it; None if never connected.
    pub last_seen_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
    pub facts: Option<HostFacts>,
    /// Unix ms when the facts were read on the host.
    pub facts_at_ms: Option<i64>,
}

/// An enrollment token as listed (its secret is never kept).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EnrollmentToken {
    pub id: String,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub uses_allowed: i64,
    pub uses: i64,
}

/// Why an enrollment token was refused; each has its own code on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnrollRefusal {
    Unknown,
    Expired,
    UsedUp,
}

/// What the store says of an agent's credential.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentAuth {
    Valid,
    Unknown,
    Revoked,
    BadCredential,
}

/// What an agent last reported of one inventory table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InventoryStatus {
    pub agent_id: String,
    pub table: String,
    /// Unix ms when the agent read it on the host.
    pub collected_at_ms: i64,
    pub received_at_ms: i64,
    pub available: bool,
    pub reason: Option<String>,
    pub rows: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_ids_have_one_shape() {
        let id = new_agent_id();
        assert!(is_agent_id(&id), "{id}");
        assert!(!is_agent_id("agt-XYZ"));
        assert!(!is_agent_id("agt-0123456789abcdef0"));
        assert!(!is_agent_id("tok-0123456789abcdef"));
    }

    #[test]
    fn facts_are_bounded_and_an_agent_clips_its_own() {
        let mut facts = HostFacts { hostname: "h".repeat(300), ..HostFacts::default() };
        assert!(facts.check().unwrap_err().contains("`hostname` is 300 bytes"));
        facts.hostname = format!("{}é", "h".repeat(255));
        facts.ip_addresses = vec!["10.0.0.1".into(); 300];
        let clipped = facts.clone().clipped();
        assert_eq!((clipped.hostname.len(), clipped.ip_addresses.len()), (255, 256), "cut at a character boundary");
        assert!(clipped.check().is_ok());
        assert!(facts.check().is_err());
    }
}

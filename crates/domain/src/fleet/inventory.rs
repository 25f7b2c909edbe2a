//! The inventory tables agents report, declared once: the agent's collectors fill exactly these
//! columns, `query_inventory` may ask for exactly these, and `docs/inventory.md` is generated
//! from them (a test fails when it drifts). A wrong table or column is an error naming the
//! closest one.

use serde::Serialize;
use toolgate_policy::did_you_mean;

pub use super::compare::ValueKind;

#[derive(Debug, Serialize)]
pub struct Column {
    pub name: &'static str,
    pub kind: ValueKind,
    pub description: &'static str,
}

#[derive(Debug, Serialize)]
pub struct Table {
    pub name: &'static str,
    pub description: &'static str,
    /// Where on the host the agent reads it.
    pub source: &'static str,
    pub columns: &'static [Column],
}

impl Table {
    pub fn column(&self, name: &str) -> Result<&'static Column, String> {
        self.columns.iter().find(|c| c.name == name).ok_or_else(|| {
            let names = self.columns.iter().map(|c| c.name);
            format!("table `{}` has no column `{name}`: {}", self.name, did_you_mean(name, names))
        })
    }
}

const fn col(name: &'static str, kind: ValueKind, description: &'static str) -> Column {
    Column { name, kind, description }
}

use ValueKind::{Integer, Text, Version};

pub const TABLES: &[Table] = &[
    Table {
        name: "installed_software",
        description: "Installed packages.",
        source: "the dpkg database (/var/lib/dpkg/status); rpm's where dpkg is absent",
        columns: &[
            col("name", Text, "The package name."),
            col("version", Version, "The installed version, compared by the packaging system's rules."),
            col("architecture", Text, "The package's architecture (amd64, all, x86_64, noarch)."),
            col("source", Text, "The packaging system: dpkg or rpm."),
        ],
    },
    Table {
        name: "processes",
        description: "Running processes.",
        source: "/proc/PID/stat, status and cmdline",
        columns: &[
            col("pid", Integer, "Process id."),
            col("ppid", Integer, "Parent process id."),
            col("name", Text, "The executable's name (comm)."),
            col("state", Text, "The kernel's state letter (R, S, D, Z, ...)."),
            col("uid", Integer, "The real user id."),
            col("rss_bytes", Integer, "Resident memory."),
            col("cmdline", Text, "The command line, arguments joined by spaces (empty for kernel threads)."),
            col(
                "start_time_ms",
                Integer,
                "When it started (ms since the epoch): with the PID, what kill_process needs to hit this process and no later one.",
            ),
        ],
    },
    Table {
        name: "listening_ports",
        description: "TCP sockets in the LISTEN state.",
        source: "/proc/net/tcp and /proc/net/tcp6; owners from /proc/PID/fd",
        columns: &[
            col("protocol", Text, "tcp or tcp6."),
            col("address", Text, "The local address listened on."),
            col("port", Integer, "The local port."),
            col("uid", Integer, "The socket owner's user id."),
            col("pid", Integer, "The process holding the socket; -1 when it could not be read."),
            col("process", Text, "That process's name; empty when unknown."),
        ],
    },
    Table {
        name: "users",
        description: "Local user accounts.",
        source: "/etc/passwd",
        columns: &[
            col("name", Text, "The login name."),
            col("uid", Integer, "User id."),
            col("gid", Integer, "Primary group id."),
            col("description", Text, "The GECOS field."),
            col("home", Text, "Home directory."),
            col("shell", Text, "Login shell."),
        ],
    },
    Table {
        name: "network_interfaces",
        description: "Network interfaces and their addresses.",
        source: "/sys/class/net and getifaddrs(3)",
        columns: &[
            col("name", Text, "Interface name."),
            col("mac", Text, "Hardware address; empty where there is none (loopback)."),
            col("mtu", Integer, "MTU in bytes."),
            col("state", Text, "Operational state (up, down, unknown)."),
            col("addresses", Text, "Its IPv4 and IPv6 addresses, comma-separated."),
        ],
    },
    Table {
        name: "systemd_units",
        description: "Every systemd unit of every type (services, sockets, timers, mounts, ...): the ones \
                      loaded and the installed unit files, enabled or not; templates (`getty@.service`) \
                      are not units and are left out. Not available where systemd is not running.",
        source: "systemctl list-units --all, list-unit-files and show",
        columns: &[
            col("name", Text, "The unit name, e.g. cron.service or apt-daily.timer."),
            col("unit_type", Text, "service, socket, timer, mount, target, path, slice, scope, device, ..."),
            col("load_state", Text, "loaded, not-found, masked, ..."),
            col("active_state", Text, "active, inactive, failed, ..."),
            col("sub_state", Text, "running, exited, dead, waiting, mounted, ..."),
            col("unit_file_state", Text, "enabled, disabled, static, masked, ...; empty for a unit without a file."),
            col("since_ms", Integer, "When it entered its present state (ms since the epoch); 0 for never."),
            col("description", Text, "The unit's description."),
        ],
    },
    Table {
        name: "services",
        description: "systemd service units systemd has loaded (`systemd_units` has every unit, with its \
                      unit file state); not available where systemd is not running.",
        source: "systemctl list-units --type=service --all",
        columns: &[
            col("name", Text, "The unit name, e.g. ssh.service."),
            col("load_state", Text, "loaded, not-found, masked, ..."),
            col("active_state", Text, "active, inactive, failed, ..."),
            col("sub_state", Text, "running, exited, dead, ..."),
            col("description", Text, "The unit's description."),
        ],
    },
];

/// The table named `name`, or an error naming the closest table.
pub fn table(name: &str) -> Result<&'static Table, String> {
    TABLES.iter().find(|t| t.name == name).ok_or_else(|| {
        let names = TABLES.iter().map(|t| t.name);
        format!("no inventory table `{name}`: {} (list_inventory_tables describes them)", did_you_mean(name, names))
    })
}

/// `docs/inventory.md`, generated from [`TABLES`].
pub fn markdown() -> String {
    let mut out = String::from(
        "# Inventory tables\n\nGenerated from `crates/domain/src/fleet/inventory.rs` (a test fails when this file \
         drifts; `TOOLGATE_BLESS=1 cargo test --test snapshots` rewrites it). Agents report these tables on \
         connect and on their schedule; `get_agent_inventory` and `query_inventory` ask for them by these \
         names. A `version` column compares by the packaging system's rules (Debian's: epochs, `~`, \
         revisions), so `version < \"3.0.11-1~deb12u2\"` means what dpkg means.\n",
    );
    for table in TABLES {
        out.push_str(&format!("\n## `{}`\n\n{} Read from {}.\n\n", table.name, table.description, table.source));
        out.push_str("| column | type | meaning |\n|---|---|---|\n");
        for c in table.columns {
            out.push_str(&format!("| `{}` | {} | {} |\n", c.name, c.kind.as_str(), c.description));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_snake_case() {
        let mut seen = std::collections::HashSet::new();
        for t in TABLES {
            assert!(seen.insert(t.name), "table {} twice", t.name);
            let mut columns = std::collections::HashSet::new();
            for c in t.columns {
                assert!(columns.insert(c.name), "{}.{} twice", t.name, c.name);
                assert!(c.name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{}", c.name);
            }
        }
    }

    #[test]
    fn a_wrong_name_is_answered_with_the_closest() {
        let e = table("installed_sofware").unwrap_err();
        assert!(e.contains("did you mean `installed_software`"), "{e}");
        let e = table("processes").unwrap().column("nmae").unwrap_err();
        assert!(e.contains("did you mean `name`"), "{e}");
    }
}

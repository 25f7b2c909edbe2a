//! What the agent reads off its host. Every value comes from the host itself (procfs, sysfs,
//! /etc, the package database); a table the host has no source for says so, with the reason,
//! rather than reporting an empty list as if it were true.

pub(crate) mod facts;
mod network;
pub(crate) mod processes;
mod software;
mod system;
pub(crate) mod systemd;

use serde_json::{Map, Value};
use toolgate_domain::fleet::inventory::TABLES;
use toolgate_domain::fleet::wire::InventoryReport;

pub use facts::host_facts;

/// One row: column name to value.
pub type Row = Map<String, Value>;

/// Why a table could not be read on this host.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

impl From<std::io::Error> for Unavailable {
    fn from(e: std::io::Error) -> Self {
        Unavailable(e.to_string())
    }
}

/// Reads one declared table.
pub fn table(name: &str) -> Result<Vec<Row>, Unavailable> {
    match name {
        "installed_software" => software::installed_software(),
        "processes" => processes::processes(),
        "listening_ports" => network::listening_ports(),
        "users" => system::users(),
        "network_interfaces" => network::interfaces(),
        "services" => systemd::services(),
        "systemd_units" => systemd::units(),
        other => Err(Unavailable(format!("this agent has no collector for table `{other}`"))),
    }
}

/// Every declared table, as reports stamped with when each was read.
pub fn all_tables(now_ms: impl Fn() -> i64) -> Vec<InventoryReport> {
    TABLES
        .iter()
        .map(|t| {
            let (available, reason, rows) = match table(t.name) {
                Ok(rows) => (true, None, rows),
                Err(Unavailable(reason)) => (false, Some(reason), Vec::new()),
            };
            InventoryReport { table: t.name.to_string(), collected_at_ms: now_ms(), available, reason, rows }
        })
        .collect()
}

/// Runs a fixed command (never a shell), in the C locale; its standard output, or what went
/// wrong.
pub(crate) fn output(program: &str, args: &[&str]) -> Result<String, String> {
    output_with(program, args, &[])
}

/// [`output`] with more of the environment set (`env`, beside `LC_ALL=C`).
pub(crate) fn output_with(program: &str, args: &[&str], env: &[(&str, &str)]) -> Result<String, String> {
    let out = std::process::Command::new(program)
        .args(args)
        .env("LC_ALL", "C")
        .envs(env.iter().copied())
        .output()
        .map_err(|e| format!("`{program}` could not run: {e}"))?;
    if !out.status.success() {
        return Err(format!("`{program} {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Builds a row from (column, value) pairs.
pub(crate) fn row<const N: usize>(pairs: [(&str, Value); N]) -> Row {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every collector fills exactly its declared columns, read off this very machine.
    #[test]
    fn collectors_fill_the_declared_columns() {
        for t in TABLES {
            let rows = match table(t.name) {
                Ok(rows) => rows,
                Err(Unavailable(reason)) => {
                    assert!(["services", "systemd_units"].contains(&t.name), "{}: {reason}", t.name);
                    continue;
                }
            };
            assert!(!rows.is_empty() || t.name == "listening_ports", "{} is empty", t.name);
            for row in rows {
                let mut keys: Vec<&str> = row.keys().map(String::as_str).collect();
                let mut declared: Vec<&str> = t.columns.iter().map(|c| c.name).collect();
                keys.sort_unstable();
                declared.sort_unstable();
                assert_eq!(keys, declared, "{}", t.name);
            }
        }
    }
}

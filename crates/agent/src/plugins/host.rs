//! `host`: the endpoint as it is now, read by the same collectors as the inventory.

use serde_json::{Map, Value, json};
use toolgate_domain::fleet::compare::glob_matches;

use super::{PluginContext, text};
use crate::collect::{self, Row, row};

pub fn facts(_: &PluginContext, _: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let f = collect::host_facts();
    Ok(vec![row([
        ("hostname", json!(f.hostname)),
        ("os", json!(f.os_pretty_name)),
        ("kernel", json!(f.kernel)),
        ("arch", json!(f.arch)),
        ("cpu_count", json!(f.cpu_count)),
        ("memory_total_bytes", json!(f.memory_total_bytes)),
        ("uptime_secs", json!(f.uptime_secs)),
    ])])
}

pub fn disk_usage(_: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let only = text(params, "mount");
    let disks = collect::host_facts().disks;
    if let Some(mount) = only
        && !disks.iter().any(|d| d.mount == mount)
    {
        return Err(format!("no local filesystem is mounted at `{mount}`"));
    }
    Ok(disks
        .into_iter()
        .filter(|d| only.is_none_or(|m| m == d.mount))
        .map(|d| {
            let used = d.size_bytes.saturating_sub(d.free_bytes);
            let percent = (used * 100).checked_div(d.size_bytes).unwrap_or(0);
            row([
                ("mount", json!(d.mount)),
                ("filesystem", json!(d.filesystem)),
                ("size_bytes", json!(d.size_bytes)),
                ("free_bytes", json!(d.free_bytes)),
                ("used_percent", json!(percent)),
            ])
        })
        .collect())
}

/// A collector's table, kept to the rows whose `column` matches the `name` glob, if given.
fn table_named(table: &str, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let rows = collect::table(table).map_err(|e| format!("cannot read {table} on this host: {e}"))?;
    let Some(pattern) = text(params, "name") else { return Ok(rows) };
    Ok(rows
        .into_iter()
        .filter(|r| {
            r.get("name").and_then(Value::as_str).is_some_and(|n| glob_matches(pattern.as_bytes(), n.as_bytes()))
        })
        .collect())
}

pub fn processes(_: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    table_named("processes", params)
}

pub fn listening_ports(_: &PluginContext, _: &Map<String, Value>) -> Result<Vec<Row>, String> {
    collect::table("listening_ports").map_err(|e| format!("cannot read the listening ports: {e}"))
}

pub fn installed_software(_: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    table_named("installed_software", params)
}

//! What systemd knows, read with fixed `systemctl` command lines (arguments, never a shell):
//! the unit listing shared by the `systemd_units` and `services` inventory tables and the
//! `systemd` plugin's actions.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::json;

use super::{Row, Unavailable, output, row};

/// systemd's own test for "systemd is the init system": sd_booted(3).
const SYSTEMD_RUNNING: &str = "/run/systemd/system";

/// Whether systemd is this host's init system.
pub(crate) fn systemd_runs() -> bool {
    Path::new(SYSTEMD_RUNNING).exists()
}

/// One unit's properties as `systemctl show` prints them.
pub(crate) type Unit = BTreeMap<String, String>;

/// The names in the first column of `systemctl list-units`/`list-unit-files` output.
pub(crate) fn first_column(listing: &str) -> impl Iterator<Item = String> + '_ {
    listing.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_string)
}

/// A template (`getty@.service`) is a unit file but not a unit: `systemctl show` refuses it.
fn is_template(name: &str) -> bool {
    name.contains("@.")
}

/// Every unit matching `pattern` (all when None): the loaded ones (running or referenced) and
/// the installed unit files (enabled or not), templates left out, sorted and each once.
pub(crate) fn unit_names(pattern: Option<&str>) -> Result<Vec<String>, String> {
    let mut loaded = vec!["list-units", "--all", "--plain", "--no-legend", "--full"];
    let mut files = vec!["list-unit-files", "--plain", "--no-legend", "--full"];
    if let Some(pattern) = pattern {
        loaded.extend(["--", pattern]);
        files.extend(["--", pattern]);
    }
    let (loaded, files) = (output("systemctl", &loaded)?, output("systemctl", &files)?);
    let names: BTreeSet<String> = first_column(&loaded).chain(first_column(&files)).collect();
    Ok(names.into_iter().filter(|n| !is_template(n)).collect())
}

/// `systemctl show` of these units: the named properties, one map per unit, in order (none for
/// none: `systemctl show` alone would show the manager's own).
pub(crate) fn show(units: &[String], properties: &str) -> Result<Vec<Unit>, String> {
    if units.is_empty() {
        return Ok(Vec::new());
    }
    let mut args = vec!["show", "--no-pager", "--timestamp=unix", "--property", properties, "--"];
    args.extend(units.iter().map(String::as_str));
    Ok(parse_show(&output("systemctl", &args)?))
}

/// `systemctl show`'s `Key=value` lines, units separated by an empty line.
pub(crate) fn parse_show(text: &str) -> Vec<Unit> {
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| block.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.into(), v.into())).collect())
        .collect()
}

/// `@SECONDS` (`--timestamp=unix`) in ms; 0 for an empty one (never).
pub(crate) fn timestamp_ms(value: &str) -> i64 {
    value.strip_prefix('@').and_then(|s| s.parse::<i64>().ok()).map_or(0, |secs| secs * 1000)
}

pub(crate) fn property<'a>(unit: &'a Unit, key: &str) -> &'a str {
    unit.get(key).map_or("", String::as_str)
}

pub(crate) fn number(unit: &Unit, key: &str) -> i64 {
    property(unit, key).parse().unwrap_or(0)
}

pub(crate) fn require_systemd() -> Result<(), Unavailable> {
    if systemd_runs() {
        Ok(())
    } else {
        Err(Unavailable("not available on this host: no systemd (it is not the init system)".into()))
    }
}

/// The `systemd_units` table: every unit of every type, loaded or installed.
pub fn units() -> Result<Vec<Row>, Unavailable> {
    require_systemd()?;
    let properties = "Id,Description,LoadState,ActiveState,SubState,UnitFileState,StateChangeTimestamp";
    let units = show(&unit_names(None).map_err(Unavailable)?, properties).map_err(Unavailable)?;
    Ok(units
        .iter()
        .map(|u| {
            let name = property(u, "Id");
            row([
                ("name", json!(name)),
                ("unit_type", json!(name.rsplit_once('.').map_or("", |(_, kind)| kind))),
                ("load_state", json!(property(u, "LoadState"))),
                ("active_state", json!(property(u, "ActiveState"))),
                ("sub_state", json!(property(u, "SubState"))),
                ("unit_file_state", json!(property(u, "UnitFileState"))),
                ("since_ms", json!(timestamp_ms(property(u, "StateChangeTimestamp")))),
                ("description", json!(property(u, "Description"))),
            ])
        })
        .collect())
}

/// The `services` table: the service units systemd has loaded.
pub fn services() -> Result<Vec<Row>, Unavailable> {
    require_systemd()?;
    let listing =
        output("systemctl", &["list-units", "--type=service", "--all", "--no-legend", "--plain", "--no-pager"])
            .map_err(Unavailable)?;
    Ok(listing.lines().filter_map(parse_unit_line).collect())
}

fn parse_unit_line(line: &str) -> Option<Row> {
    let mut parts = line.split_whitespace();
    let (name, load, active, sub) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let description: Vec<&str> = parts.collect();
    Some(row([
        ("name", json!(name)),
        ("load_state", json!(load)),
        ("active_state", json!(active)),
        ("sub_state", json!(sub)),
        ("description", json!(description.join(" "))),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_lines() {
        let r = parse_unit_line("ssh.service loaded active running OpenBSD Secure Shell server").unwrap();
        assert_eq!(r["description"], "OpenBSD Secure Shell server");
        assert_eq!(r["sub_state"], "running");
    }

    #[test]
    fn show_blocks_become_units() {
        let text = "Id=cron.service\nActiveState=active\nStateChangeTimestamp=@1764791774\n\nId=gone.service\nLoadState=not-found\nStateChangeTimestamp=\n";
        let units = parse_show(text);
        assert_eq!(units.len(), 2);
        assert_eq!(property(&units[0], "ActiveState"), "active");
        assert_eq!(timestamp_ms(property(&units[0], "StateChangeTimestamp")), 1_764_791_774_000);
        assert_eq!(timestamp_ms(property(&units[1], "StateChangeTimestamp")), 0, "never");
        assert_eq!(property(&units[1], "LoadState"), "not-found");
    }

    #[test]
    fn templates_are_not_units() {
        assert!(is_template("getty@.service"));
        assert!(!is_template("getty@tty1.service"));
        assert!(!is_template("cron.service"));
    }
}

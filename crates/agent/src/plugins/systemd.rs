//! `systemd`: the endpoint's units and its journal, read with fixed `systemctl show` and
//! `journalctl -o json` command lines (arguments, never a shell). A host whose init is not
//! systemd answers "not available on this host: no systemd", never an empty success.

use serde_json::{Map, Value, json};

use super::{PluginContext, output, required_text, text};
use crate::collect::systemd::{first_column, number, property, show, timestamp_ms, unit_names};
use crate::collect::{Row, row};

pub(super) fn require_systemd() -> Result<(), String> {
    crate::collect::systemd::require_systemd().map_err(|unavailable| unavailable.0)
}

/// A unit name or glob as systemctl takes them, and nothing else (no options, no spaces).
pub(super) fn unit_pattern(value: &str) -> Result<&str, String> {
    let fine = !value.is_empty()
        && value.len() <= 256
        && !value.starts_with('-')
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || b"@._:-\\*?[]".contains(&b));
    if fine {
        Ok(value)
    } else {
        Err(format!("`{value}` is not a unit name or glob (letters, digits, @ . _ : - \\ * ? [ ])"))
    }
}

pub(super) fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?', '['])
}

/// The properties every row is made of.
const SHOWN: &str =
    "Id,Description,LoadState,ActiveState,SubState,StateChangeTimestamp,MainPID,NRestarts,Result,ExecMainStatus";

pub fn service_status(_: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let pattern = unit_pattern(required_text(params, "unit")?)?;
    require_systemd()?;
    let units: Vec<String> = if is_glob(pattern) { unit_names(Some(pattern))? } else { vec![pattern.to_string()] };
    Ok(show(&units, SHOWN)?
        .iter()
        .map(|u| {
            row([
                ("unit", json!(property(u, "Id"))),
                ("description", json!(property(u, "Description"))),
                ("load_state", json!(property(u, "LoadState"))),
                ("active_state", json!(property(u, "ActiveState"))),
                ("sub_state", json!(property(u, "SubState"))),
                ("since_ms", json!(timestamp_ms(property(u, "StateChangeTimestamp")))),
                ("main_pid", json!(number(u, "MainPID"))),
                ("restarts", json!(number(u, "NRestarts"))),
                ("result", json!(property(u, "Result"))),
                ("exit_status", json!(number(u, "ExecMainStatus"))),
            ])
        })
        .collect())
}

pub fn failed_units(_: &PluginContext, _: &Map<String, Value>) -> Result<Vec<Row>, String> {
    require_systemd()?;
    let listed = output("systemctl", &["list-units", "--state=failed", "--all", "--plain", "--no-legend", "--full"])?;
    let units: Vec<String> = first_column(&listed).collect();
    Ok(show(&units, SHOWN)?
        .iter()
        .map(|u| {
            row([
                ("unit", json!(property(u, "Id"))),
                ("description", json!(property(u, "Description"))),
                ("result", json!(property(u, "Result"))),
                ("failed_at_ms", json!(timestamp_ms(property(u, "StateChangeTimestamp")))),
                ("exit_status", json!(number(u, "ExecMainStatus"))),
            ])
        })
        .collect())
}

/// syslog's priorities, most severe first: `journalctl -p NAME` is that one or worse.
const PRIORITIES: [&str; 8] = ["emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"];

fn bounded(
    params: &Map<String, Value>,
    name: &str,
    default: i64,
    range: std::ops::RangeInclusive<i64>,
) -> Result<i64, String> {
    let value = params.get(name).and_then(Value::as_i64).unwrap_or(default);
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(format!("`{name}` is {}-{}, not {value}", range.start(), range.end()))
    }
}

pub fn journal_tail(_: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let unit = text(params, "unit").map(unit_pattern).transpose()?;
    let priority = text(params, "priority").unwrap_or("info");
    if !PRIORITIES.contains(&priority) {
        return Err(format!("`priority` is one of {}, not `{priority}`", PRIORITIES.join(", ")));
    }
    let lines = bounded(params, "lines", 100, 1..=1000)?.to_string();
    let max_bytes = bounded(params, "max_bytes", 65_536, 1024..=1_048_576)? as usize;
    let since = params.get("since_ms").and_then(Value::as_i64).map(|ms| format!("@{}", ms.div_euclid(1000)));
    require_systemd()?;
    let mut args = vec!["--no-pager", "--quiet", "--output=json", "--lines", &lines, "--priority", priority];
    if let Some(unit) = unit {
        args.extend(["--unit", unit]);
    }
    if let Some(since) = &since {
        args.extend(["--since", since]);
    }
    let entries: Vec<Entry> = output("journalctl", &args)?.lines().filter_map(parse_entry).collect();
    Ok(newest_within(entries, max_bytes)
        .into_iter()
        .map(|e| {
            row([
                ("time_ms", json!(e.time_ms)),
                ("unit", json!(e.unit)),
                ("priority", json!(e.priority)),
                ("message", json!(e.message)),
            ])
        })
        .collect())
}

#[derive(Debug, PartialEq)]
struct Entry {
    time_ms: i64,
    unit: String,
    priority: &'static str,
    message: String,
}

/// One line of `journalctl -o json`. A message the journal keeps as bytes (not UTF-8) comes
/// as an array of numbers: decoded with replacement characters.
fn parse_entry(line: &str) -> Option<Entry> {
    let fields: Map<String, Value> = serde_json::from_str(line).ok()?;
    let field = |name: &str| fields.get(name).and_then(Value::as_str);
    let micros: i64 = field("__REALTIME_TIMESTAMP")?.parse().ok()?;
    let message = match fields.get("MESSAGE") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(bytes)) => {
            let bytes: Vec<u8> = bytes.iter().filter_map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok())).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        }
        _ => String::new(),
    };
    let unit = field("UNIT").or(field("_SYSTEMD_UNIT")).or(field("SYSLOG_IDENTIFIER")).unwrap_or("");
    let priority =
        field("PRIORITY").and_then(|p| p.parse::<usize>().ok()).and_then(|p| PRIORITIES.get(p)).unwrap_or(&"info");
    Some(Entry { time_ms: micros / 1000, unit: unit.to_string(), priority, message })
}

/// The newest entries whose messages fit in `max_bytes`, oldest first; a single message
/// longer than that is cut (at a character boundary).
fn newest_within(entries: Vec<Entry>, max_bytes: usize) -> Vec<Entry> {
    let mut kept = Vec::new();
    let mut left = max_bytes;
    for mut entry in entries.into_iter().rev() {
        if entry.message.len() > left {
            if !kept.is_empty() {
                break;
            }
            let mut cut = left;
            while !entry.message.is_char_boundary(cut) {
                cut -= 1;
            }
            entry.message.truncate(cut);
        }
        left -= entry.message.len();
        kept.push(entry);
    }
    kept.reverse();
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_patterns_are_names_and_globs_only() {
        assert!(unit_pattern("cron.service").is_ok());
        assert!(unit_pattern("getty@tty1.service").is_ok());
        assert!(unit_pattern("ssh*").is_ok());
        for bad in ["", "--all", "cron; reboot", "a b", "$(x)"] {
            assert!(unit_pattern(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn journal_lines_become_entries() {
        let line = r#"{"__REALTIME_TIMESTAMP":"1764791774123456","PRIORITY":"3","_SYSTEMD_UNIT":"init.scope","UNIT":"broken.service","MESSAGE":"broken.service: Failed with result 'exit-code'."}"#;
        let entry = parse_entry(line).unwrap();
        assert_eq!(entry.time_ms, 1_764_791_774_123);
        assert_eq!((entry.unit.as_str(), entry.priority), ("broken.service", "err"));
        let bytes = r#"{"__REALTIME_TIMESTAMP":"1","SYSLOG_IDENTIFIER":"x","MESSAGE":[104,105,255]}"#;
        assert_eq!(parse_entry(bytes).unwrap().message, "hi\u{fffd}");
        assert!(parse_entry("not json").is_none());
    }

    #[test]
    fn the_newest_entries_are_kept_within_the_byte_bound() {
        let entry = |n: i64, message: &str| Entry {
            time_ms: n,
            unit: String::new(),
            priority: "info",
            message: message.into(),
        };
        let kept = newest_within(vec![entry(1, "aaaa"), entry(2, "bbbb"), entry(3, "cccc")], 9);
        assert_eq!(kept.iter().map(|e| e.time_ms).collect::<Vec<_>>(), [2, 3], "oldest first, the oldest dropped");
        let cut = newest_within(vec![entry(1, "ééé")], 3);
        assert_eq!(cut[0].message, "é", "cut at a character boundary");
    }
}

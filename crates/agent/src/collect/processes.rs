//! processes: /proc/PID/stat, status and cmdline.

use std::fs;

use serde_json::json;

use super::{Row, Unavailable, row};

/// The fields of /proc/PID/stat after the command name, which may itself hold spaces and
/// parentheses: (name, state, ppid, rss pages).
fn parse_stat(stat: &str) -> Option<(&str, &str, i64, i64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?;
    let rest: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // After the name: state(0) ppid(1) ... rss is field 24 of the whole line, 21 here.
    Some((name, rest.first()?, rest.get(1)?.parse().ok()?, rest.get(21)?.parse().ok()?))
}

pub fn processes() -> Result<Vec<Row>, Unavailable> {
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).ok().flatten().unwrap_or(4096);
    let mut rows = Vec::new();
    for entry in fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i64>().ok()) else { continue };
        // A process may exit between the listing and the reads: skip it.
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else { continue };
        let Some((name, state, ppid, rss_pages)) = parse_stat(&stat) else { continue };
        let uid = fs::read_to_string(entry.path().join("status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Uid:"))
                    .and_then(|u| u.split_whitespace().next()?.parse::<i64>().ok())
            })
            .unwrap_or(-1);
        let cmdline = fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).trim_end_matches('\0').replace('\0', " ");
        rows.push(row([
            ("pid", json!(pid)),
            ("ppid", json!(ppid)),
            ("name", json!(name)),
            ("state", json!(state)),
            ("uid", json!(uid)),
            ("rss_bytes", json!(rss_pages * page)),
            ("cmdline", json!(cmdline)),
        ]));
    }
    rows.sort_by_key(|r| r["pid"].as_i64());
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_parentheses_and_spaces() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 100 1000 250 18446744073709551615";
        assert_eq!(parse_stat(stat), Some(("a (b) c", "S", 1, 250)));
    }

    #[test]
    fn this_process_is_listed() {
        let me = i64::from(std::process::id());
        assert!(processes().unwrap().iter().any(|r| r["pid"] == me));
    }
}

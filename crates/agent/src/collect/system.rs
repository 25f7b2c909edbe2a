//! users (/etc/passwd) and services (systemd, where it runs).

use std::fs;
use std::path::Path;

use serde_json::json;

use super::{Row, Unavailable, row};

pub fn users() -> Result<Vec<Row>, Unavailable> {
    let text = fs::read_to_string("/etc/passwd")?;
    Ok(text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            let [name, _, uid, gid, description, home, shell] = f[..] else { return None };
            Some(row([
                ("name", json!(name)),
                ("uid", json!(uid.parse::<i64>().ok()?)),
                ("gid", json!(gid.parse::<i64>().ok()?)),
                ("description", json!(description)),
                ("home", json!(home)),
                ("shell", json!(shell)),
            ]))
        })
        .collect())
}

/// systemd's own test for "systemd is the init system": sd_booted(3).
const SYSTEMD_RUNNING: &str = "/run/systemd/system";

/// Whether systemd is this host's init system.
pub(crate) fn systemd_runs() -> bool {
    Path::new(SYSTEMD_RUNNING).exists()
}

pub fn services() -> Result<Vec<Row>, Unavailable> {
    if !systemd_runs() {
        return Err(Unavailable("systemd is not running on this host (no /run/systemd/system)".into()));
    }
    let output = std::process::Command::new("systemctl")
        .args(["list-units", "--type=service", "--all", "--no-legend", "--plain", "--no-pager"])
        .output()
        .map_err(|e| Unavailable(format!("systemd runs but `systemctl` could not: {e}")))?;
    if !output.status.success() {
        return Err(Unavailable(format!(
            "`systemctl list-units` failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).lines().filter_map(parse_unit_line).collect())
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
    fn root_is_a_user() {
        assert!(users().unwrap().iter().any(|r| r["name"] == "root" && r["uid"] == 0));
    }

    #[test]
    fn unit_lines() {
        let r = parse_unit_line("ssh.service loaded active running OpenBSD Secure Shell server").unwrap();
        assert_eq!(r["description"], "OpenBSD Secure Shell server");
        assert_eq!(r["sub_state"], "running");
    }
}

//! installed_software: the dpkg database, or rpm's where dpkg is absent.

use std::fs;
use std::path::Path;

use serde_json::json;

use super::{Row, Unavailable, row};

const DPKG_STATUS: &str = "/var/lib/dpkg/status";

pub fn installed_software() -> Result<Vec<Row>, Unavailable> {
    if Path::new(DPKG_STATUS).exists() {
        return Ok(parse_dpkg_status(&fs::read_to_string(DPKG_STATUS)?));
    }
    if Path::new("/var/lib/rpm").exists() {
        return rpm();
    }
    Err(Unavailable("no package database on this host (neither dpkg's nor rpm's)".into()))
}

/// The packages dpkg knows in any state but not-installed (what `dpkg-query -W` lists).
pub(crate) fn parse_dpkg_status(text: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    for paragraph in text.split("\n\n") {
        let (mut name, mut version, mut arch, mut state) = ("", "", "", "");
        for line in paragraph.lines() {
            if let Some(v) = line.strip_prefix("Package: ") {
                name = v.trim();
            } else if let Some(v) = line.strip_prefix("Version: ") {
                version = v.trim();
            } else if let Some(v) = line.strip_prefix("Architecture: ") {
                arch = v.trim();
            } else if let Some(v) = line.strip_prefix("Status: ") {
                state = v.split_whitespace().nth(2).unwrap_or("");
            }
        }
        if !name.is_empty() && !state.is_empty() && state != "not-installed" {
            rows.push(row([
                ("name", json!(name)),
                ("version", json!(version)),
                ("architecture", json!(arch)),
                ("source", json!("dpkg")),
            ]));
        }
    }
    rows
}

/// rpm keeps its database in a format of its own: the agent asks rpm itself (a fixed
/// command, never a shell).
fn rpm() -> Result<Vec<Row>, Unavailable> {
    let output = std::process::Command::new("rpm")
        .args(["-qa", "--queryformat", "%{NAME}\t%{EPOCHNUM}:%{VERSION}-%{RELEASE}\t%{ARCH}\n"])
        .output()
        .map_err(|e| Unavailable(format!("rpm's database is here but `rpm` could not run: {e}")))?;
    if !output.status.success() {
        return Err(Unavailable(format!("`rpm -qa` failed: {}", String::from_utf8_lossy(&output.stderr).trim())));
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| {
            let mut parts = l.split('\t');
            let (name, version, arch) = (parts.next()?, parts.next()?, parts.next()?);
            Some(row([
                ("name", json!(name)),
                ("version", json!(version.strip_prefix("0:").unwrap_or(version))),
                ("architecture", json!(arch)),
                ("source", json!("rpm")),
            ]))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dpkg_states() {
        let text = "Package: a\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1:2.0-1\n\n\
                    Package: b\nStatus: deinstall ok config-files\nArchitecture: all\nVersion: 3\n\n\
                    Package: c\nStatus: purge ok not-installed\nArchitecture: all\n";
        let rows = parse_dpkg_status(text);
        let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(rows[0]["version"], "1:2.0-1");
    }
}

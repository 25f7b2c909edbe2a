//! `updates`: the package upgrades apt would make (a simulated `dist-upgrade` over the host's
//! current package lists: the agent never refreshes them, which would change the host) and
//! Debian's reboot marker. A host without apt answers "not available on this host: no apt".

use std::path::Path;

use serde_json::{Map, Value, json};
use toolgate_domain::fleet::compare::glob_matches;

use super::{PluginContext, output, text};
use crate::collect::facts::REBOOT_MARKER;
use crate::collect::{Row, row};

const APT_GET: &str = "/usr/bin/apt-get";
/// Beside the reboot marker: the packages that asked for the reboot.
const REBOOT_PACKAGES: &str = "/run/reboot-required.pkgs";

pub fn pending_updates(_: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    if !Path::new(APT_GET).exists() {
        return Err("not available on this host: no apt".into());
    }
    // Simulated, and without apt's lock: it reads the lists and the dpkg status, changes nothing.
    let simulated = output(APT_GET, &["--simulate", "--quiet", "-o", "Debug::NoLocking=1", "dist-upgrade"])?;
    let only = text(params, "name");
    Ok(simulated
        .lines()
        .filter_map(parse_upgrade)
        .filter(|u| only.is_none_or(|glob| glob_matches(glob.as_bytes(), u.name.as_bytes())))
        .map(|u| {
            row([
                ("name", json!(u.name)),
                ("installed_version", json!(u.installed)),
                ("candidate_version", json!(u.candidate)),
                ("origin", json!(u.origin)),
                ("security", json!(i64::from(u.security))),
            ])
        })
        .collect())
}

#[derive(Debug, PartialEq)]
struct Upgrade<'a> {
    name: &'a str,
    installed: &'a str,
    candidate: &'a str,
    origin: &'a str,
    security: bool,
}

/// `Inst NAME [INSTALLED] (CANDIDATE ORIGIN, ORIGIN... [ARCH])`: an upgrade of an installed
/// package. A package new to the host (no `[INSTALLED]`) is not one.
fn parse_upgrade(line: &str) -> Option<Upgrade<'_>> {
    let (name, rest) = line.strip_prefix("Inst ")?.split_once(' ')?;
    let (installed, rest) = rest.strip_prefix('[')?.split_once("] (")?;
    let inside = &rest[..rest.rfind(')')?];
    let (candidate, origin) = inside.split_once(' ').unwrap_or((inside, ""));
    // The trailing ` [ARCH]` is the architecture, not a source.
    let origin = origin.rsplit_once(" [").map_or(origin, |(o, _)| o).trim();
    let security = origin.to_ascii_lowercase().contains("security");
    Some(Upgrade { name, installed, candidate, origin, security })
}

pub fn reboot_required(_: &PluginContext, _: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let marker = std::fs::metadata(REBOOT_MARKER).ok();
    let since_ms = marker
        .as_ref()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as i64);
    let packages = match marker {
        Some(_) => std::fs::read_to_string(REBOOT_PACKAGES).unwrap_or_default(),
        None => String::new(),
    };
    let packages: Vec<&str> = packages.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    Ok(vec![row([
        ("required", json!(i64::from(marker.is_some()))),
        ("since_ms", json!(since_ms)),
        ("packages", json!(packages.join(", "))),
    ])])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulated_upgrades_are_read() {
        let line = "Inst libc6 [2.36-9+deb12u4] (2.36-9+deb12u7 Debian:12.7/stable, Debian-Security:12/stable-security [amd64]) []";
        let u = parse_upgrade(line).unwrap();
        assert_eq!((u.name, u.installed, u.candidate), ("libc6", "2.36-9+deb12u4", "2.36-9+deb12u7"));
        assert_eq!(u.origin, "Debian:12.7/stable, Debian-Security:12/stable-security");
        assert!(u.security);
        let local = parse_upgrade("Inst toolgate-probe [1.0] (2.0 localhost [all])").unwrap();
        assert_eq!((local.candidate, local.origin, local.security), ("2.0", "localhost", false));
        assert_eq!(parse_upgrade("Inst newpkg (1.0 Debian:12/stable [amd64])"), None, "new, not an upgrade");
        assert_eq!(parse_upgrade("Conf libc6 (2.36-9+deb12u7 Debian:12.7/stable [amd64])"), None);
    }
}

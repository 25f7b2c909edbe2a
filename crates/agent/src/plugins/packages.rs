//! `packages`: apt's install, upgrade and removal of packages, and its pending updates
//! applied. The plan is apt's own simulation of the command (`apt-get --simulate`, without
//! apt's lock: it reads the lists and the dpkg status, changes nothing), parsed into what it
//! would install, upgrade or remove. Applying installs exactly the plan's versions, so what
//! runs is what was planned (and, bound to an approval, what a person approved).

use std::path::Path;

use serde_json::{Map, Value, json};

use super::{PluginContext, output, required_text, text};
use crate::collect::{Row, row};

const APT_GET: &str = "/usr/bin/apt-get";

/// One package apt would change.
#[derive(Clone, Debug, PartialEq)]
struct Step {
    package: String,
    action: &'static str,
    version_now: String,
    version_after: String,
    origin: String,
    security: bool,
}

/// A package name or version as apt takes them: no option, no space, nothing a shell or apt
/// would read as more than one word.
fn apt_word<'a>(what: &str, value: &'a str) -> Result<&'a str, String> {
    let fine = !value.is_empty()
        && value.len() <= 256
        && !value.starts_with('-')
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.:~_".contains(&b));
    if fine { Ok(value) } else { Err(format!("`{value}` is not a {what} apt takes")) }
}

fn require_apt() -> Result<(), String> {
    if Path::new(APT_GET).exists() { Ok(()) } else { Err("not available on this host: no apt".into()) }
}

/// Runs apt-get non-interactively (keeping changed configuration files); its output.
fn apt_get(args: &[&str]) -> Result<String, String> {
    let options =
        ["--quiet", "--yes", "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"];
    let all: Vec<&str> = options.iter().chain(args).copied().collect();
    crate::collect::output_with(APT_GET, &all, &[("DEBIAN_FRONTEND", "noninteractive")])
}

/// `Inst NAME [NOW] (AFTER ORIGIN... [ARCH])` and `Remv NAME [NOW]` lines of a simulation.
fn parse_simulation(text: &str) -> Vec<Step> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Step> {
    if let Some(rest) = line.strip_prefix("Remv ") {
        let (package, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        let version_now = rest.strip_prefix('[').and_then(|r| r.split_once(']')).map_or("", |(v, _)| v);
        return Some(Step {
            package: package.into(),
            action: "remove",
            version_now: version_now.into(),
            version_after: String::new(),
            origin: String::new(),
            security: false,
        });
    }
    let (package, rest) = line.strip_prefix("Inst ")?.split_once(' ')?;
    let (version_now, rest) = match rest.strip_prefix('[') {
        Some(r) => r.split_once("] ")?,
        None => ("", rest),
    };
    let inside = rest.strip_prefix('(')?;
    let inside = &inside[..inside.rfind(')')?];
    let (after, origin) = inside.split_once(' ').unwrap_or((inside, ""));
    let origin = origin.rsplit_once(" [").map_or(origin, |(o, _)| o).trim();
    Some(Step {
        package: package.into(),
        action: if version_now.is_empty() { "install" } else { "upgrade" },
        version_now: version_now.into(),
        version_after: after.into(),
        origin: origin.into(),
        security: origin.to_ascii_lowercase().contains("security"),
    })
}

/// The installed version of `package`; empty when it is not installed.
fn installed(package: &str) -> String {
    let text = output("dpkg-query", &["--show", "--showformat=${db:Status-Abbrev}${Version}", "--", package]);
    // `ii ` then the version: installed; anything else (`rc `: removed, config kept) is not.
    text.ok().and_then(|t| t.strip_prefix("ii ").map(str::to_string)).unwrap_or_default()
}

/// What the action would do on this host, as apt simulates it.
fn simulate(action: &str, params: &Map<String, Value>) -> Result<Vec<Step>, String> {
    require_apt()?;
    let simulated = |args: &[&str]| -> Result<Vec<Step>, String> {
        let mut all = vec!["--simulate", "-o", "Debug::NoLocking=1"];
        all.extend(args);
        Ok(parse_simulation(&apt_get(&all)?))
    };
    let steps = match action {
        "install" | "upgrade" => {
            let name = apt_word("package name", required_text(params, "name")?)?;
            let target = match text(params, "version") {
                Some(v) => format!("{name}={}", apt_word("version", v)?),
                None => name.to_string(),
            };
            if action == "upgrade" && installed(name).is_empty() {
                return Err(format!("`{name}` is not installed: install_package installs it"));
            }
            let steps = simulated(&["install", &target])?;
            if action == "upgrade" && steps.iter().any(|s| s.package == name && s.action != "upgrade") {
                return Err(format!("`{target}` is not an upgrade of the installed `{name}` {}", installed(name)));
            }
            steps
        }
        "remove" => {
            let name = apt_word("package name", required_text(params, "name")?)?;
            if installed(name).is_empty() {
                return Err(format!("`{name}` is not installed: nothing to remove"));
            }
            simulated(&["remove", name])?
        }
        _ => {
            let steps = simulated(&["dist-upgrade"])?;
            let security_only = params.get("security_only").and_then(Value::as_i64) == Some(1);
            steps.into_iter().filter(|s| s.action != "remove" && (!security_only || s.security)).collect()
        }
    };
    if action != "remove"
        && let Some(removed) = steps.iter().find(|s| s.action == "remove")
    {
        return Err(format!("apt would remove `{}` to do this: refused, nothing was changed", removed.package));
    }
    Ok(steps)
}

fn plan_rows(steps: Vec<Step>) -> Vec<Row> {
    steps
        .into_iter()
        .map(|s| {
            row([
                ("package", json!(s.package)),
                ("action", json!(s.action)),
                ("version_now", json!(s.version_now)),
                ("version_after", json!(s.version_after)),
                ("origin", json!(s.origin)),
                ("security", json!(i64::from(s.security))),
            ])
        })
        .collect()
}

/// Carries out `steps`: the removals, or exactly the planned versions installed.
fn apply(steps: &[Step]) -> Result<Vec<Row>, String> {
    let removals: Vec<&str> = steps.iter().filter(|s| s.action == "remove").map(|s| s.package.as_str()).collect();
    let pinned: Vec<String> =
        steps.iter().filter(|s| s.action != "remove").map(|s| format!("{}={}", s.package, s.version_after)).collect();
    if !removals.is_empty() {
        let mut args = vec!["remove"];
        args.extend(&removals);
        apt_get(&args)?;
    }
    if !pinned.is_empty() {
        let mut args = vec!["install", "--no-remove"];
        args.extend(pinned.iter().map(String::as_str));
        apt_get(&args)?;
    }
    Ok(steps
        .iter()
        .map(|s| {
            row([
                ("package", json!(s.package)),
                ("action", json!(s.action)),
                ("version_before", json!(s.version_now)),
                ("version_after", json!(installed(&s.package))),
            ])
        })
        .collect())
}

macro_rules! planned_change {
    ($plan:ident, $apply:ident, $action:literal) => {
        pub fn $plan(_: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
            Ok(plan_rows(simulate($action, params)?))
        }

        pub fn $apply(_: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
            apply(&simulate($action, params)?)
        }
    };
}

planned_change!(install_plan, install, "install");
planned_change!(upgrade_plan, upgrade, "upgrade");
planned_change!(remove_plan, remove, "remove");
planned_change!(apply_updates_plan, apply_updates, "apply_updates");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulations_are_read() {
        let text = "NOTE: This is only a simulation!\nInst toolgate-probe [1.0] (1.1 toolgate-tests:probe [all])\nInst newdep (2.0 Debian:12.7/stable, Debian-Security:12/stable-security [amd64])\nConf toolgate-probe (1.1 toolgate-tests:probe [all])\nRemv oldpkg [0.9]\n";
        let steps = parse_simulation(text);
        assert_eq!(steps.len(), 3, "{steps:?}");
        assert_eq!(
            (steps[0].action, steps[0].version_now.as_str(), steps[0].version_after.as_str()),
            ("upgrade", "1.0", "1.1")
        );
        assert_eq!(steps[0].origin, "toolgate-tests:probe");
        assert_eq!((steps[1].action, steps[1].version_now.as_str(), steps[1].security), ("install", "", true));
        assert_eq!(
            (steps[2].action, steps[2].package.as_str(), steps[2].version_now.as_str()),
            ("remove", "oldpkg", "0.9")
        );
    }

    #[test]
    fn only_plain_names_and_versions_reach_apt() {
        assert!(apt_word("version", "1:2.36-9+deb12u7~bpo").is_ok());
        for bad in ["", "-o", "a b", "x;y", "pkg=1", "$(x)"] {
            assert!(apt_word("package name", bad).is_err(), "{bad}");
        }
    }
}

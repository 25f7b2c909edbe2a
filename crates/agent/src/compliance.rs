//! Evaluates compliance rules against this host: each outcome carries its evidence (what the
//! host showed) or, when the agent cannot tell, why.

use std::cmp::Ordering;

use serde_json::{Map, Value, json};
use toolgate_domain::fleet::compliance::{Check, ComplianceStatus, Rule, RuleResult};
use toolgate_domain::fleet::version::compare_debian;

use crate::collect;
use crate::plugins::{self, PluginContext};

pub fn evaluate(ctx: &PluginContext, rules: &[Rule]) -> Vec<RuleResult> {
    rules
        .iter()
        .filter(|r| r.enabled)
        .map(|rule| {
            let (status, evidence) = check(ctx, &rule.check);
            RuleResult { rule_id: rule.id.clone(), status, evidence }
        })
        .collect()
}

use ComplianceStatus::{Compliant, NonCompliant, Unknown};

fn check(ctx: &PluginContext, check: &Check) -> (ComplianceStatus, String) {
    match check {
        Check::PackageAtLeast { package, version } => package_at_least(package, version),
        Check::FileContainsLine { path, line } => file_contains_line(ctx, path, line),
        Check::PortNotListening { port } => port_not_listening(*port),
        Check::FileSha256 { path, sha256 } => {
            let params: Map<String, Value> = [("path".to_string(), json!(path))].into_iter().collect();
            match plugins::run(ctx, "files", "sha256", &params) {
                Ok(rows) => {
                    let actual = rows.first().and_then(|r| r.get("sha256")).and_then(Value::as_str).unwrap_or("");
                    if actual.eq_ignore_ascii_case(sha256) {
                        (Compliant, format!("{path} has SHA-256 {actual}"))
                    } else {
                        (NonCompliant, format!("{path} has SHA-256 {actual}, not {sha256}"))
                    }
                }
                Err(e) if e.contains("No such file") => (NonCompliant, format!("{path} does not exist")),
                Err(e) => (Unknown, e),
            }
        }
    }
}

fn package_at_least(package: &str, wanted: &str) -> (ComplianceStatus, String) {
    let rows = match collect::table("installed_software") {
        Ok(rows) => rows,
        Err(e) => return (Unknown, format!("no package database to read: {e}")),
    };
    let installed: Vec<&str> = rows
        .iter()
        .filter(|r| r.get("name").and_then(Value::as_str) == Some(package))
        .filter_map(|r| r.get("version").and_then(Value::as_str))
        .collect();
    let Some(newest) = installed.iter().copied().max_by(|a, b| compare_debian(a, b)) else {
        return (NonCompliant, format!("{package} is not installed"));
    };
    if compare_debian(newest, wanted) == Ordering::Less {
        (NonCompliant, format!("{package} {newest} is installed, older than {wanted}"))
    } else {
        (Compliant, format!("{package} {newest} is installed (at least {wanted})"))
    }
}

/// Reads through the plugins' guard: a rule cannot probe the agent's own state either.
fn file_contains_line(ctx: &PluginContext, path: &str, line: &str) -> (ComplianceStatus, String) {
    let read = plugins::guard::open_readable(ctx, std::path::Path::new(path), None).and_then(|(_, mut file)| {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes).map(|_| bytes).map_err(|e| format!("cannot read {path}: {e}"))
    });
    match read {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            match text.lines().position(|l| l.trim() == line.trim()) {
                Some(i) => (Compliant, format!("{path} line {}: {}", i + 1, line.trim())),
                None => {
                    (NonCompliant, format!("{path} ({} lines) has no line `{}`", text.lines().count(), line.trim()))
                }
            }
        }
        Err(e) if e.contains("No such file") => (NonCompliant, format!("{path} does not exist")),
        Err(e) => (Unknown, e),
    }
}

fn port_not_listening(port: u16) -> (ComplianceStatus, String) {
    let rows = match collect::table("listening_ports") {
        Ok(rows) => rows,
        Err(e) => return (Unknown, format!("cannot read the listening sockets: {e}")),
    };
    let listeners: Vec<String> = rows
        .iter()
        .filter(|r| r.get("port").and_then(Value::as_i64) == Some(i64::from(port)))
        .map(|r| {
            let get = |k: &str| r.get(k).map(|v| v.to_string().trim_matches('"').to_string()).unwrap_or_default();
            format!("{} {}:{} (pid {}, {})", get("protocol"), get("address"), port, get("pid"), get("process"))
        })
        .collect();
    if listeners.is_empty() {
        (Compliant, format!("nothing listens on TCP port {port}"))
    } else {
        (NonCompliant, format!("listening: {}", listeners.join("; ")))
    }
}

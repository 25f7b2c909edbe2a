//! `host.free_disk_space`: apt's downloaded packages (`/var/cache/apt/archives/*.deb`) and the
//! systemd journal's archived files, oldest first, until the journal fits a size. The plan
//! lists every file it would delete, with its size: archived journals and downloaded packages
//! never change once written, so an approved plan stays the plan until one is added or gone.
//! Applying deletes exactly those files (the active journal files stay, as journald's own
//! vacuum leaves them).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::PluginContext;
use crate::collect::{Row, row};

const APT_ARCHIVES: &str = "/var/cache/apt/archives";
const JOURNALS: [&str; 2] = ["/var/log/journal", "/run/log/journal"];
const DEFAULT_JOURNAL_BYTES: i64 = 100 * 1024 * 1024;

/// A file it would delete, and why.
struct Doomed {
    path: PathBuf,
    bytes: u64,
    what: &'static str,
}

/// Every regular file directly in `dir` (or one level below it, for the journal's machine
/// directories) whose name passes `keep`, with its size and modification time.
fn files(dir: &Path, depth: usize, keep: &dyn Fn(&str) -> bool) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        let name = entry.file_name().to_string_lossy().into_owned();
        if meta.is_dir() && depth > 0 {
            found.extend(files(&entry.path(), depth - 1, keep));
        } else if meta.is_file() && keep(&name) {
            found.push((entry.path(), meta.len(), meta.modified().unwrap_or(std::time::UNIX_EPOCH)));
        }
    }
    found
}

/// journald's archived files: `NAME@SEQNUM-...journal` (rotated) or `*.journal~` (dirty).
fn archived(name: &str) -> bool {
    (name.ends_with(".journal") && name.contains('@')) || name.ends_with(".journal~")
}

fn doomed(params: &Map<String, Value>) -> Result<Vec<Doomed>, String> {
    let limit = params.get("journal_max_bytes").and_then(Value::as_i64).unwrap_or(DEFAULT_JOURNAL_BYTES);
    if limit < 0 {
        return Err(format!("journal_max_bytes must not be negative, not {limit}"));
    }
    let mut list: Vec<Doomed> = files(Path::new(APT_ARCHIVES), 0, &|n| n.ends_with(".deb"))
        .into_iter()
        .map(|(path, bytes, _)| Doomed { path, bytes, what: "downloaded package" })
        .collect();
    let journal: Vec<_> = JOURNALS
        .iter()
        .flat_map(|d| files(Path::new(d), 1, &|n| n.ends_with(".journal") || n.ends_with(".journal~")))
        .collect();
    let mut total: u64 = journal.iter().map(|(_, bytes, _)| bytes).sum();
    let mut old: Vec<_> =
        journal.into_iter().filter(|(p, _, _)| p.file_name().is_some_and(|n| archived(&n.to_string_lossy()))).collect();
    old.sort_by(|a, b| a.2.cmp(&b.2).then(a.0.cmp(&b.0)));
    for (path, bytes, _) in old {
        if total <= limit as u64 {
            break;
        }
        total -= bytes;
        list.push(Doomed { path, bytes, what: "archived journal" });
    }
    list.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(list)
}

fn rows(list: &[Doomed]) -> Vec<Row> {
    list.iter()
        .map(|d| {
            row([("path", json!(d.path.display().to_string())), ("kind", json!(d.what)), ("bytes", json!(d.bytes))])
        })
        .collect()
}

pub fn plan(_: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    Ok(rows(&doomed(params)?))
}

pub fn apply(_: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let list = doomed(params)?;
    for d in &list {
        match std::fs::remove_file(&d.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot delete {}: {e}", d.path.display())),
        }
    }
    Ok(rows(&list))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_archived_journals_are_vacuumed() {
        assert!(archived("system@0005f2a1b2c3d4e5-0123456789abcdef.journal"));
        assert!(archived("user-1000@abc.journal~"));
        assert!(!archived("system.journal"), "the active file stays");
    }
}

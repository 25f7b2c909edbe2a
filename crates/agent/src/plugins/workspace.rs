//! `workspace`: changes confined to `STATE_DIR/work`, real and observable, harmless anywhere.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};

use serde_json::{Map, Value, json};

use super::{PluginContext, plain_file_name, required_text, text};
use crate::collect::{Row, row};

fn work_dir(ctx: &PluginContext) -> Result<std::path::PathBuf, String> {
    let dir = ctx.work_dir();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// The workspace plugin's configuration key capping the size `append_line` may grow a file to.
pub const MAX_FILE_BYTES: &str = "max_file_bytes";

/// How many lines a file holds; 0 when it does not exist.
fn line_count(path: &std::path::Path) -> Result<usize, String> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(bytes.iter().filter(|b| **b == b'\n').count()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// The file `append_line` appends to and the line, checked against the size cap the
/// plugin's configuration may set (set_plugin_config workspace max_file_bytes).
fn checked_append<'p>(
    ctx: &PluginContext,
    params: &'p Map<String, Value>,
) -> Result<(std::path::PathBuf, &'p str), String> {
    let name = plain_file_name(required_text(params, "file")?)?;
    let line = required_text(params, "line")?;
    if line.contains(['\n', '\r']) {
        return Err("the line must not contain a line break".into());
    }
    let path = ctx.work_dir().join(name);
    if let Some(cap) = ctx.config.get(MAX_FILE_BYTES) {
        let cap: u64 = cap.parse().map_err(|_| {
            format!("the workspace plugin's configuration `{MAX_FILE_BYTES}` is `{cap}`, not a number of bytes: set_plugin_config sets it")
        })?;
        let size = std::fs::metadata(&path).map_or(0, |m| m.len());
        let after = size + line.len() as u64 + 1;
        if after > cap {
            return Err(format!(
                "refused: {} would grow to {after} bytes, past the {cap} the workspace plugin's configuration `{MAX_FILE_BYTES}` allows",
                path.display()
            ));
        }
    }
    Ok((path, line))
}

pub fn append_line_plan(ctx: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let (path, _) = checked_append(ctx, params)?;
    let now = line_count(&path)?;
    Ok(vec![row([
        ("file", json!(path.display().to_string())),
        ("lines_now", json!(now)),
        ("lines_after", json!(now + 1)),
    ])])
}

pub fn append_line(ctx: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    work_dir(ctx)?;
    let (path, line) = checked_append(ctx, params)?;
    let failed = |e: std::io::Error| format!("cannot append to {}: {e}", path.display());
    let mut file = std::fs::OpenOptions::new().append(true).create(true).mode(0o600).open(&path).map_err(failed)?;
    file.write_all(format!("{line}\n").as_bytes()).and_then(|()| file.sync_all()).map_err(failed)?;
    let count = std::fs::read(&path).map_err(failed)?.iter().filter(|b| **b == b'\n').count();
    Ok(vec![row([("file", json!(path.display().to_string())), ("line_count", json!(count))])])
}

/// A file's size; -1 when it does not exist.
fn size_now(path: &std::path::Path) -> i64 {
    std::fs::metadata(path).map_or(-1, |m| m.len() as i64)
}

pub fn write_marker_plan(ctx: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let path = ctx.work_dir().join(plain_file_name(required_text(params, "name")?)?);
    Ok(vec![row([
        ("file", json!(path.display().to_string())),
        ("size_bytes_now", json!(size_now(&path))),
        ("size_bytes_after", json!(text(params, "text").unwrap_or("").len())),
    ])])
}

pub fn write_marker(ctx: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let name = plain_file_name(required_text(params, "name")?)?;
    let contents = text(params, "text").unwrap_or("");
    let dir = work_dir(ctx)?;
    crate::state::write_durably(&dir, name, contents.as_bytes()).map_err(|e| e.to_string())?;
    let path = dir.join(name);
    Ok(vec![row([("file", json!(path.display().to_string())), ("size_bytes", json!(contents.len()))])])
}

pub fn clear_cache_plan(ctx: &PluginContext, _: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let cache = ctx.work_dir().join("cache");
    let files = match std::fs::read_dir(&cache) {
        Ok(entries) => entries.flatten().filter(|e| e.file_type().is_ok_and(|t| !t.is_dir())).count(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(format!("cannot read {}: {e}", cache.display())),
    };
    Ok(vec![row([("files_to_remove", json!(files))])])
}

pub fn clear_cache(ctx: &PluginContext, _: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let cache = work_dir(ctx)?.join("cache");
    let entries = match std::fs::read_dir(&cache) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(vec![row([("removed_files", json!(0))])]);
        }
        Err(e) => return Err(format!("cannot read {}: {e}", cache.display())),
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        // Files only: the cache holds no directories, and a link is removed, never followed.
        if entry.file_type().is_ok_and(|t| !t.is_dir()) {
            std::fs::remove_file(&path).map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
            removed += 1;
        }
    }
    Ok(vec![row([("removed_files", json!(removed))])])
}

const SECRET_DIGEST_FILE: &str = "secret-token.sha256";

fn the_token(ctx: &PluginContext) -> Result<&str, String> {
    ctx.secrets.0.get("token").map(String::as_str).ok_or_else(|| {
        "the step was given no secret `token` (set it with set_plugin_secret, plugin workspace)".to_string()
    })
}

pub fn secret_digest_plan(ctx: &PluginContext, _: &Map<String, Value>) -> Result<Vec<Row>, String> {
    the_token(ctx)?;
    let path = ctx.work_dir().join(SECRET_DIGEST_FILE);
    Ok(vec![row([("file", json!(path.display().to_string())), ("size_bytes_now", json!(size_now(&path)))])])
}

/// Proves the step was given the secret `token`: writes its SHA-256 (never the value) to
/// `WORK/secret-token.sha256` and answers it.
pub fn secret_digest(ctx: &PluginContext, _: &Map<String, Value>) -> Result<Vec<Row>, String> {
    use sha2::{Digest, Sha256};
    let value = the_token(ctx)?;
    let digest: String = Sha256::digest(value.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    let dir = work_dir(ctx)?;
    crate::state::write_durably(&dir, SECRET_DIGEST_FILE, digest.as_bytes()).map_err(|e| e.to_string())?;
    Ok(vec![row([("file", json!(dir.join(SECRET_DIGEST_FILE).display().to_string())), ("sha256", json!(digest))])])
}

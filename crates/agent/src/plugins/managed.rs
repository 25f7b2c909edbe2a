//! `files.managed_line` and `files.restore_backup`: one line ensured present or absent in a
//! text file, only under the directories the plugin's configuration allows
//! (`set_plugin_config files allowed_paths`, comma-separated absolute directories; none by
//! default), never a symbolic link, never the agent's own state. The plan is the unified diff
//! of the file it would write; applying keeps the file as it was in the agent's state dir
//! (`STATE_DIR/backups`), which `restore_backup` puts back.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value, json};
use similar::TextDiff;

use super::{PluginContext, absolute, required_text, text};
use crate::collect::{Row, row};

use toolgate_domain::fleet::instruction::{ALLOWED_PATHS_KEY as ALLOWED_PATHS, path_allowed};
/// What a backup holds for a file that did not exist: restoring deletes it.
const ABSENT: &[u8] = b"";
const ABSENT_SUFFIX: &str = ".absent";

/// `asked`, checked: absolute, plain (no `.` or `..`), under an allowed directory (also once
/// its directories are resolved), not a symbolic link, not the agent's state.
fn allowed(ctx: &PluginContext, asked: &str) -> Result<PathBuf, String> {
    let path = absolute(asked)?;
    if path.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir)) || asked.ends_with('/') {
        return Err(format!("`{asked}` is not a plain path to a file (no `.`, `..` or trailing `/`)"));
    }
    let Some(listed) = ctx.config.get(ALLOWED_PATHS).filter(|l| !l.trim().is_empty()) else {
        return Err(format!(
            "no path is allowed: set_plugin_config files {ALLOWED_PATHS} to the directories it may change (comma-separated, absolute)"
        ));
    };
    let dirs: Vec<&Path> = listed.split(',').map(str::trim).filter(|d| d.starts_with('/')).map(Path::new).collect();
    let outside = || format!("`{asked}` is outside the allowed paths ({listed}): nothing was changed");
    if !path_allowed(listed, asked) {
        return Err(outside());
    }
    let parent = path.parent().ok_or_else(outside)?;
    let resolved = parent
        .canonicalize()
        .map_err(|e| format!("{}: {e}", parent.display()))?
        .join(path.file_name().ok_or_else(outside)?);
    if !dirs.iter().any(|d| resolved.starts_with(d.canonicalize().unwrap_or_else(|_| d.to_path_buf()))) {
        return Err(outside());
    }
    if std::fs::symlink_metadata(&resolved).is_ok_and(|m| !m.is_file()) {
        return Err(format!("`{asked}` is not a regular file (a link or a directory): never changed"));
    }
    if super::guard::is_agent_state(ctx, &resolved) {
        return Err(format!("`{asked}` is the agent's own state: never changed by an instruction"));
    }
    Ok(resolved)
}

fn read(path: &Path) -> Result<Option<String>, String> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| format!("{} is not UTF-8 text", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// The file's text with `line` present or absent; None when it already is.
fn ensured(now: &str, line: &str, present: bool) -> Option<String> {
    let has = now.lines().any(|l| l == line);
    match (present, has) {
        (true, true) | (false, false) => None,
        (true, false) => {
            let sep = if now.is_empty() || now.ends_with('\n') { "" } else { "\n" };
            Some(format!("{now}{sep}{line}\n"))
        }
        (false, true) => Some(now.split_inclusive('\n').filter(|l| l.trim_end_matches(['\n', '\r']) != line).collect()),
    }
}

fn diff(path: &Path, before: &str, after: &str) -> String {
    let name = path.display().to_string();
    TextDiff::from_lines(before, after).unified_diff().context_radius(3).header(&name, &name).to_string()
}

/// The path, what to do, and the file's text now and after.
struct Edit {
    path: PathBuf,
    existed: bool,
    before: String,
    after: Option<String>,
}

fn edit(ctx: &PluginContext, params: &Map<String, Value>) -> Result<Edit, String> {
    let path = allowed(ctx, required_text(params, "path")?)?;
    let line = required_text(params, "line")?;
    if line.contains(['\n', '\r']) {
        return Err("the line must not contain a line break".into());
    }
    let present = match text(params, "state").unwrap_or("present") {
        "present" => true,
        "absent" => false,
        other => return Err(format!("state `{other}`: present or absent")),
    };
    let now = read(&path)?;
    let (existed, before) = (now.is_some(), now.unwrap_or_default());
    let after = ensured(&before, line, present);
    Ok(Edit { path, existed, before, after })
}

fn backup_of(ctx: &PluginContext, path: &Path) -> PathBuf {
    use sha2::{Digest, Sha256};
    let digest: String =
        Sha256::digest(path.as_os_str().as_encoded_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    ctx.state_dir.join("backups").join(digest)
}

/// Writes `text` to `path` through a temporary file in its directory, renamed over it, with
/// the mode and owner the file had (0644, root's, for a new one).
fn replace(path: &Path, text: &[u8]) -> Result<(), String> {
    let failed = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let old = std::fs::metadata(path).ok();
    let temporary =
        path.with_file_name(format!(".{}.toolgate-new", path.file_name().unwrap_or_default().to_string_lossy()));
    let mode = old.as_ref().map_or(0o644, |m| m.permissions().mode() & 0o7777);
    let mut file =
        std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(&temporary).map_err(failed)?;
    let written = std::io::Write::write_all(&mut file, text).and_then(|()| file.sync_all());
    let owned = old.map_or(Ok(()), |m| std::os::unix::fs::fchown(&file, Some(m.uid()), Some(m.gid())));
    if let Err(e) =
        written.and(owned).and_then(|()| std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(mode)))
    {
        let _ = std::fs::remove_file(&temporary);
        return Err(failed(e));
    }
    std::fs::rename(&temporary, path).map_err(failed)
}

fn keep_backup(ctx: &PluginContext, edit: &Edit) -> Result<PathBuf, String> {
    let backup = backup_of(ctx, &edit.path);
    let dir = backup.parent().unwrap_or(&ctx.state_dir);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let _ = std::fs::remove_file(backup.with_extension("absent"));
    let _ = std::fs::remove_file(&backup);
    let (name, bytes) = match edit.existed {
        true => (backup.clone(), edit.before.as_bytes()),
        false => (PathBuf::from(format!("{}{ABSENT_SUFFIX}", backup.display())), ABSENT),
    };
    crate::state::write_durably(dir, name.file_name().unwrap_or_default().to_str().unwrap_or_default(), bytes)
        .map_err(|e| format!("the backup could not be kept, so nothing was changed: {e}"))?;
    Ok(name)
}

fn change(edit: &Edit) -> &'static str {
    match &edit.after {
        None => "none",
        Some(_) if !edit.existed => "create",
        Some(after) if after.len() > edit.before.len() => "add",
        Some(_) => "remove",
    }
}

pub fn plan(ctx: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let e = edit(ctx, params)?;
    let diff = e.after.as_deref().map_or(String::new(), |after| diff(&e.path, &e.before, after));
    Ok(vec![row([("path", json!(e.path.display().to_string())), ("change", json!(change(&e))), ("diff", json!(diff))])])
}

pub fn apply(ctx: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let e = edit(ctx, params)?;
    let backup = match &e.after {
        None => String::new(),
        Some(after) => {
            let backup = keep_backup(ctx, &e)?;
            replace(&e.path, after.as_bytes())?;
            backup.display().to_string()
        }
    };
    Ok(vec![row([
        ("path", json!(e.path.display().to_string())),
        ("change", json!(change(&e))),
        ("backup", json!(backup)),
    ])])
}

/// The backup kept for `path`: its text, or None for a file that did not exist.
fn backup(ctx: &PluginContext, path: &Path) -> Result<(PathBuf, Option<String>), String> {
    let kept = backup_of(ctx, path);
    let absent = PathBuf::from(format!("{}{ABSENT_SUFFIX}", kept.display()));
    if absent.exists() {
        return Ok((absent, None));
    }
    match read(&kept)? {
        Some(text) => Ok((kept, Some(text))),
        None => Err(format!("no backup of {} is kept (managed_line keeps one when it changes a file)", path.display())),
    }
}

pub fn restore_plan(ctx: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let path = allowed(ctx, required_text(params, "path")?)?;
    let (_, kept) = backup(ctx, &path)?;
    let now = read(&path)?.unwrap_or_default();
    let diff = diff(&path, &now, kept.as_deref().unwrap_or(""));
    let change = if kept.is_none() { "delete" } else { "restore" };
    Ok(vec![row([("path", json!(path.display().to_string())), ("change", json!(change)), ("diff", json!(diff))])])
}

pub fn restore(ctx: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let path = allowed(ctx, required_text(params, "path")?)?;
    let (kept_at, kept) = backup(ctx, &path)?;
    let change = match &kept {
        Some(text) => {
            replace(&path, text.as_bytes())?;
            "restore"
        }
        None => {
            std::fs::remove_file(&path)
                .or_else(|e| if e.kind() == std::io::ErrorKind::NotFound { Ok(()) } else { Err(e) })
                .map_err(|e| format!("cannot delete {}: {e}", path.display()))?;
            "delete"
        }
    };
    let _ = std::fs::remove_file(&kept_at);
    Ok(vec![row([
        ("path", json!(path.display().to_string())),
        ("change", json!(change)),
        ("backup", json!(kept_at.display().to_string())),
    ])])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_added_once_and_removed_everywhere() {
        assert_eq!(ensured("a\nb", "c", true).as_deref(), Some("a\nb\nc\n"));
        assert_eq!(ensured("a\nc\n", "c", true), None);
        assert_eq!(ensured("c\na\nc\n", "c", false).as_deref(), Some("a\n"));
        assert_eq!(ensured("", "c", false), None);
    }

    #[test]
    fn a_line_is_managed_only_where_allowed_and_restored_from_its_backup() {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let mut ctx = PluginContext::new(state.path().to_path_buf());
        let file = dir.path().join("app.conf");
        std::fs::write(&file, "a = 1\n").unwrap();
        let params =
            |line: &str| json!({"path": file.display().to_string(), "line": line}).as_object().cloned().unwrap();
        assert!(plan(&ctx, &params("b = 2")).unwrap_err().contains("no path is allowed"));
        ctx.config.insert(ALLOWED_PATHS.into(), "/nowhere".into());
        assert!(plan(&ctx, &params("b = 2")).unwrap_err().contains("outside the allowed paths"));
        ctx.config.insert(ALLOWED_PATHS.into(), format!("/nowhere, {}", dir.path().display()));
        let planned = plan(&ctx, &params("b = 2")).unwrap();
        assert!(planned[0]["diff"].as_str().unwrap().contains("+b = 2"), "{planned:?}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "a = 1\n", "a plan writes nothing");
        apply(&ctx, &params("b = 2")).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "a = 1\nb = 2\n");
        assert_eq!(apply(&ctx, &params("b = 2")).unwrap()[0]["change"], "none", "present already");
        let path_only = json!({"path": file.display().to_string()}).as_object().cloned().unwrap();
        assert!(restore_plan(&ctx, &path_only).unwrap()[0]["diff"].as_str().unwrap().contains("-b = 2"));
        restore(&ctx, &path_only).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "a = 1\n");
        assert!(restore(&ctx, &path_only).unwrap_err().contains("no backup"));
        let escape = json!({"path": format!("{}/../etc/passwd", dir.path().display()), "line": "x"});
        assert!(plan(&ctx, escape.as_object().unwrap()).unwrap_err().contains("not a plain path"));
    }
}

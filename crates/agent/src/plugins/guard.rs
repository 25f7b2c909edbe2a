//! What no action may read: the agent's state dir (its credential in `agent.json`, its run
//! journals, its work files), however the path is spelled. A path is refused
//!
//! - by where it really is: resolved (links, `..`, `/proc/self/root/...`) and, once opened,
//!   as the kernel names the open file (`/proc/self/fd/N`), so a link swapped in between is
//!   seen;
//! - by what it is: the open file's device and inode must be none of the state dir's files
//!   (a hard link, a file bind-mounted elsewhere), and no directory above it may be the state
//!   dir itself (the state dir bind-mounted under `/var/log`).
//!
//! Every refusal reads alike, so the answer does not say which rule matched.

use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use super::PluginContext;

/// A file's identity whatever its name: (device, inode).
type FileId = (u64, u64);

fn id_of(meta: &std::fs::Metadata) -> FileId {
    (meta.dev(), meta.ino())
}

/// The refusal every protected spelling gets.
fn refused(asked: &Path) -> String {
    format!("{} is the agent's own state: no instruction reads it", asked.display())
}

/// The state dir's identity and that of every file and directory below it.
struct Protected {
    dir: PathBuf,
    dir_id: Option<FileId>,
    ids: HashSet<FileId>,
}

impl Protected {
    fn of(state_dir: &Path) -> Self {
        let dir = state_dir.canonicalize().unwrap_or_else(|_| state_dir.to_path_buf());
        let dir_id = std::fs::metadata(&dir).ok().map(|m| id_of(&m));
        let mut ids = HashSet::new();
        let mut pending = vec![dir.clone()];
        while let Some(next) = pending.pop() {
            let Ok(entries) = std::fs::read_dir(&next) else { continue };
            for entry in entries.flatten() {
                // symlink_metadata: a link inside the state dir is not followed out of it.
                let Ok(meta) = entry.path().symlink_metadata() else { continue };
                ids.insert(id_of(&meta));
                if meta.is_dir() {
                    pending.push(entry.path());
                }
            }
        }
        Protected { dir, dir_id, ids }
    }

    /// Whether `path` (an absolute, resolved path) is in the state dir by name, or by a
    /// directory above it that is the state dir under another name.
    fn covers_path(&self, path: &Path) -> bool {
        if path.starts_with(&self.dir) {
            return true;
        }
        let Some(dir_id) = self.dir_id else { return false };
        path.ancestors().skip(1).any(|above| std::fs::metadata(above).is_ok_and(|m| id_of(&m) == dir_id))
    }
}

/// Opens `asked` (an absolute path) for reading as a regular file, unless it is the agent's
/// own state; with `root`, only a file under that directory. The path it really has, and the
/// open file.
pub(crate) fn open_readable(ctx: &PluginContext, asked: &Path, root: Option<&Path>) -> Result<(PathBuf, File), String> {
    let protected = Protected::of(&ctx.state_dir);
    let resolved = asked.canonicalize().map_err(|e| format!("cannot open {}: {e}", asked.display()))?;
    check_place(&protected, asked, &resolved, root)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NOCTTY | nix::libc::O_NONBLOCK)
        .open(&resolved)
        .map_err(|e| format!("cannot open {}: {e}", asked.display()))?;
    let meta = file.metadata().map_err(|e| format!("cannot read {}: {e}", asked.display()))?;
    if protected.ids.contains(&id_of(&meta)) || protected.dir_id == Some(id_of(&meta)) {
        return Err(refused(asked));
    }
    // Where the open file really is: a component swapped for a link after the check above
    // shows here.
    let opened = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).unwrap_or(resolved);
    check_place(&protected, asked, &opened, root)?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", asked.display()));
    }
    Ok((opened, file))
}

fn check_place(protected: &Protected, asked: &Path, resolved: &Path, root: Option<&Path>) -> Result<(), String> {
    if protected.covers_path(resolved) {
        return Err(refused(asked));
    }
    if let Some(root) = root {
        let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        if !resolved.starts_with(&root) {
            return Err(format!(
                "{} is outside {}: tail reads logs, not arbitrary files",
                resolved.display(),
                root.display()
            ));
        }
    }
    Ok(())
}

/// Resolves `asked` as a directory to read under `root`, unless it is (or is inside) the
/// agent's own state; its real path.
pub(crate) fn readable_directory(ctx: &PluginContext, asked: &Path, root: &Path) -> Result<PathBuf, String> {
    let protected = Protected::of(&ctx.state_dir);
    let resolved = asked.canonicalize().map_err(|e| format!("cannot open {}: {e}", asked.display()))?;
    check_place(&protected, asked, &resolved, Some(root))?;
    let meta = std::fs::metadata(&resolved).map_err(|e| format!("cannot read {}: {e}", asked.display()))?;
    if protected.dir_id == Some(id_of(&meta)) {
        return Err(refused(asked));
    }
    if !meta.is_dir() {
        return Err(format!("{} is not a directory", asked.display()));
    }
    Ok(resolved)
}

/// Whether `path` is the agent's state (by name, or as one of its files or the dir itself
/// under another name): a bundle leaves such entries out.
pub(crate) fn is_agent_state(ctx: &PluginContext, path: &Path) -> bool {
    let protected = Protected::of(&ctx.state_dir);
    let resolved = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let id = std::fs::symlink_metadata(path).ok().map(|m| id_of(&m));
    protected.covers_path(&resolved) || id.is_some_and(|id| protected.ids.contains(&id) || protected.dir_id == Some(id))
}

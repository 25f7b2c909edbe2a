//! Files the tests hold to what the code makes (snapshots, expected generated code, fixture
//! diagnostics): one way to compare them, and to rewrite them after an intended change.

use std::path::Path;

/// The variable that makes [`ensure_file_contents`] rewrite instead of compare.
pub const BLESS: &str = "TOOLGATE_BLESS";

/// `path` holds `contents`; under `TOOLGATE_BLESS=1` it is rewritten to hold them (its folder
/// made if need be). `Err` names the stale file and `command`, the one that rewrites it.
pub fn ensure_file_contents(path: &Path, contents: &str, command: &str) -> Result<(), String> {
    if std::env::var_os(BLESS).is_some() {
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder).map_err(|e| format!("cannot create {}: {e}", folder.display()))?;
        }
        return std::fs::write(path, contents).map_err(|e| format!("cannot write {}: {e}", path.display()));
    }
    match std::fs::read_to_string(path) {
        Ok(committed) if committed == contents => Ok(()),
        Ok(_) => {
            Err(format!("{} is stale: review the change, then run `{BLESS}=1 {command}` and commit it", path.display()))
        }
        Err(e) => Err(format!("{} cannot be read ({e}): run `{BLESS}=1 {command}` to write it", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_or_missing_file_names_itself_and_the_command() {
        if std::env::var_os(BLESS).is_some() {
            return; // blessing rewrites instead of comparing: nothing to check here
        }
        let dir = std::env::temp_dir().join(format!("toolgate-bless-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("expected.txt");
        std::fs::write(&path, "old").unwrap();
        assert_eq!(ensure_file_contents(&path, "old", "cargo test"), Ok(()));
        let stale = ensure_file_contents(&path, "new", "cargo test -p x").unwrap_err();
        assert!(
            stale.contains("expected.txt is stale") && stale.contains("TOOLGATE_BLESS=1 cargo test -p x"),
            "{stale}"
        );
        let missing = ensure_file_contents(&dir.join("none.txt"), "new", "cargo test").unwrap_err();
        assert!(missing.contains("cannot be read"), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

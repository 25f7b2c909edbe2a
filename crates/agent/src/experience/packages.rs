//! The package that owns a program's executable, and its version (docs/experience.md,
//! "Programs"): looked up with `dpkg-query` when a program is first named, and again once dpkg
//! has changed anything. dpkg reads its own file lists, so the agent never holds them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use toolgate_domain::fleet::experience::{AppPackage, MAX_PACKAGE_FIELD_BYTES};

/// dpkg's record of what is installed: when it changes, every owner is looked up again.
const STATUS: &str = "/var/lib/dpkg/status";
/// The most executables remembered; past it the memory starts again.
const MAX_PATHS: usize = 4096;

#[derive(Default)]
pub struct Packages {
    /// Per executable, its owner (none: no package owns it, or dpkg cannot say).
    by_path: HashMap<PathBuf, Option<AppPackage>>,
    /// Per program, the owner of the executable it ran last: what a process whose executable
    /// an upgrade replaced still runs.
    by_program: HashMap<String, AppPackage>,
    /// When dpkg's status last changed, as last seen.
    status: Option<SystemTime>,
}

impl Packages {
    /// The package of the executable process `pid` of `program` runs; none where the agent
    /// may not read it, or no package owns it.
    pub fn owner_of(&mut self, program: &str, pid: i64) -> Option<AppPackage> {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
        if exe.to_string_lossy().ends_with(" (deleted)") {
            // Replaced since the process started (an upgrade): it runs what it ran before.
            return self.by_program.get(program).cloned();
        }
        let status = std::fs::metadata(STATUS).and_then(|m| m.modified()).ok();
        if status != self.status || self.by_path.len() >= MAX_PATHS {
            self.by_path.clear();
            self.status = status;
        }
        let owner = self.by_path.entry(exe.clone()).or_insert_with(|| owner(&exe)).clone();
        match &owner {
            Some(found) => self.by_program.insert(program.to_string(), found.clone()),
            None => self.by_program.remove(program),
        };
        owner
    }
}

/// The package that owns `path` (under either of its names on a merged /usr), and its version.
fn owner(path: &Path) -> Option<AppPackage> {
    let (qualified, package) = merged_usr_names(path).iter().find_map(|p| searched(p))?;
    let version = dpkg_query(&["--show", "--showformat=${Version}", "--", &qualified])?;
    let fits = |s: &str| !s.is_empty() && s.len() <= MAX_PACKAGE_FIELD_BYTES;
    (fits(&package) && fits(&version)).then_some(AppPackage { package, version })
}

/// `path`, and its other name where /usr is merged: dpkg's lists keep the name the package
/// shipped (`/bin/sleep`), the kernel the one it resolved (`/usr/bin/sleep`).
fn merged_usr_names(path: &Path) -> Vec<PathBuf> {
    let mut names = vec![path.to_path_buf()];
    if let Ok(rest) = path.strip_prefix("/usr") {
        if ["bin", "sbin", "lib"].iter().any(|d| rest.starts_with(d)) {
            names.push(Path::new("/").join(rest));
        }
    } else if ["/bin", "/sbin", "/lib"].iter().any(|d| path.starts_with(d)) {
        names.push(Path::new("/usr").join(path.strip_prefix("/").unwrap_or(path)));
    }
    names
}

/// The package whose list holds `path`: (as dpkg names it, with any architecture; without).
fn searched(path: &Path) -> Option<(String, String)> {
    let path = path.to_str()?;
    parse_search(&dpkg_query(&["--search", "--", path])?, path)
}

/// `dpkg-query --search`'s line for exactly `path` (`pkg[:arch][, pkg…]: path`), diversions
/// aside.
fn parse_search(text: &str, path: &str) -> Option<(String, String)> {
    text.lines().filter(|l| !l.starts_with("diversion ")).find_map(|line| {
        let (packages, file) = line.rsplit_once(": ")?;
        let qualified = packages.split(", ").next()?.trim();
        let bare = qualified.split(':').next()?;
        (file == path && !bare.is_empty()).then(|| (qualified.to_string(), bare.to_string()))
    })
}

fn dpkg_query(args: &[&str]) -> Option<String> {
    let out = Command::new("dpkg-query").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_is_read_for_the_path_asked() {
        let found = |text: &str, path: &str| parse_search(text, path);
        assert_eq!(found("coreutils: /bin/sleep\n", "/bin/sleep"), Some(("coreutils".into(), "coreutils".into())));
        assert_eq!(
            found("libc-bin, libc6:amd64: /usr/bin/x", "/usr/bin/x"),
            Some(("libc-bin".into(), "libc-bin".into()))
        );
        assert_eq!(found("libc6:amd64: /lib/x", "/lib/x"), Some(("libc6:amd64".into(), "libc6".into())));
        assert_eq!(found("diversion by a from: /bin/x\ncoreutils: /bin/x", "/bin/x").unwrap().1, "coreutils");
        assert_eq!(found("coreutils: /bin/sleepy", "/bin/sleep"), None);
        assert_eq!(merged_usr_names(Path::new("/usr/bin/sleep"))[1], Path::new("/bin/sleep"));
        assert_eq!(merged_usr_names(Path::new("/sbin/init"))[1], Path::new("/usr/sbin/init"));
        assert_eq!(merged_usr_names(Path::new("/opt/x")).len(), 1);
    }

    /// This machine's dpkg (the build machine and CI are Debian): `sleep` belongs to coreutils,
    /// whichever of its names the kernel gives.
    #[test]
    fn a_running_program_is_owned_by_its_package_at_its_installed_version() {
        let mut child = Command::new("/usr/bin/sleep").arg("30").spawn().unwrap();
        let mut packages = Packages::default();
        let owner = packages.owner_of("sleep", i64::from(child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
        let owner = owner.expect("coreutils owns sleep");
        assert_eq!(owner.package, "coreutils");
        let installed = dpkg_query(&["--show", "--showformat=${Version}", "coreutils"]).unwrap();
        assert_eq!(owner.version, installed);
    }
}

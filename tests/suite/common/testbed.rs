//! The test bed: booted Debian hosts to test on (scripts/testbed/). Each endpoint is the
//! test bed's image booted with systemd-nspawn, systemd as its PID 1, with its own hostname,
//! machine id and writable layer; it shares this machine's loopback, so it reaches a server
//! on 127.0.0.1. Agents are installed on it the way a fleet installs them: the `.deb` from
//! scripts/package/deb.sh, with `apt-get install`.
//!
//! Needs root (overlay mounts, namespaces) and, the first time on a machine, the network to
//! Debian's mirror (the image is built once and cached: scripts/testbed/image.sh).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::Server;
use super::agents::{PATIENCE, is_root};

fn script(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts").join(path)
}

/// Fails the test, saying why, where the test bed cannot run.
pub fn require() {
    assert!(is_root(), "the test bed boots containers and mounts overlays: run it as root (as .ci/run does)");
    for (program, package) in [("systemd-nspawn", "systemd-container"), ("dpkg-deb", "dpkg"), ("objcopy", "binutils")] {
        assert!(
            Command::new("sh")
                .args(["-c", &format!("command -v {program}")])
                .output()
                .is_ok_and(|o| o.status.success()),
            "the test bed needs {program} (apt-get install {package}; scripts/test.sh installs it)"
        );
    }
}

/// The packages of this build (the test build's binaries, packaged by scripts/package/deb.sh
/// as a release is): made once per test process, and once more under a later version, to
/// upgrade to.
pub struct Packages {
    pub agent: PathBuf,
    pub server: PathBuf,
    /// The same agent as a later version of its package.
    pub agent_upgrade: PathBuf,
}

pub fn packages() -> &'static Packages {
    static BUILT: OnceLock<Packages> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = packages_dir();
        let mut first = package(&out.join("first"), &[]).into_iter();
        let (agent, server) = (first.next().expect("the agent's package"), first.next().expect("the server's"));
        let later = ["--only", "agent", "--version", concat!(env!("CARGO_PKG_VERSION"), "+later")];
        let agent_upgrade = package(&out.join("later"), &later).remove(0);
        Packages { agent, server, agent_upgrade }
    })
}

/// target/testbed/debs-PID: this process's packages (uncompressed debug builds, a few hundred
/// MB), after deleting those of test processes that are gone.
fn packages_dir() -> PathBuf {
    let parent = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/testbed");
    for entry in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name.strip_prefix("debs-")
            && !Path::new("/proc").join(pid).exists()
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    parent.join(format!("debs-{}", std::process::id()))
}

/// scripts/package/deb.sh on the test build's binaries (uncompressed: xz of debug builds
/// takes most of a minute); the packages it made.
fn package(out: &Path, options: &[&str]) -> Vec<PathBuf> {
    let server_bin = PathBuf::from(super::bin());
    let agent_bin = server_bin.with_file_name("toolgate-agent");
    assert!(agent_bin.exists(), "{} is built with the tests (cargo test --workspace)", agent_bin.display());
    let built = Command::new("bash")
        .arg(script("package/deb.sh"))
        .arg("--out")
        .arg(out)
        .arg("--agent-bin")
        .arg(&agent_bin)
        .arg("--server-bin")
        .arg(&server_bin)
        .args(["--compression", "none"])
        .args(options)
        .output()
        .expect("bash runs scripts/package/deb.sh");
    assert!(built.status.success(), "deb.sh: {}", String::from_utf8_lossy(&built.stderr));
    String::from_utf8(built.stdout).unwrap().lines().map(PathBuf::from).collect()
}

/// One booted endpoint; powered off (and its writable layer deleted with its directory's
/// owner, a [`Bed`]) when dropped.
pub struct Endpoint {
    pub name: String,
    dir: PathBuf,
    run: Child,
    /// How long its first boot took, to the end of systemd's start-up.
    pub boot_time: Duration,
}

/// Where a test's endpoints live: a directory under /var/tmp (overlayfs wants a real file
/// system under its writable layer), removed after the endpoints are powered off.
pub struct Bed {
    pub endpoints: Vec<Endpoint>,
    dir: tempfile::TempDir,
}

impl Bed {
    /// Boots `names.len()` endpoints, one after the other's start, and waits for each to be up.
    pub fn boot(names: &[&str]) -> Bed {
        require();
        let image = Command::new("bash").arg(script("testbed/image.sh")).output().expect("bash runs image.sh");
        assert!(image.status.success(), "the test bed's image: {}", String::from_utf8_lossy(&image.stderr));
        let dir = tempfile::Builder::new().prefix("toolgate-bed-").tempdir_in("/var/tmp").unwrap();
        // One bed boots at a time in a test process: endpoints booting all at once (each test
        // its own bed) once left a unit of the image failed with status 219 (CGROUP).
        static BOOTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one_at_a_time = BOOTING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let started: Vec<(Endpoint, Instant)> =
            names.iter().map(|name| (Endpoint::start(dir.path(), name), Instant::now())).collect();
        let endpoints = started
            .into_iter()
            .map(|(mut endpoint, at)| {
                endpoint.wait_up();
                endpoint.boot_time = at.elapsed();
                endpoint
            })
            .collect();
        Bed { endpoints, dir }
    }

    /// Boots endpoints named `names`, installs the agent package on each, enrolled with `s`,
    /// and waits until every one is online: the bed and the agents' ids by host name.
    pub fn enrolled(s: &Server, names: &[&str]) -> (Bed, std::collections::HashMap<String, String>) {
        let bed = Bed::boot(names);
        let token = super::agents::mint(s, &["--uses", &names.len().to_string()]);
        for e in &bed.endpoints {
            e.install_agent(s, &token);
        }
        let ids = super::agents::online_by_hostname(s, &super::agents::output_schemas(s), names.len());
        (bed, ids)
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        // Powered off (and their overlays unmounted) before the directory goes.
        self.endpoints.clear();
    }
}

impl Endpoint {
    fn start(bed: &Path, name: &str) -> Endpoint {
        let dir = bed.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let log = std::fs::File::create(bed.join(format!("{name}.log"))).unwrap();
        let run = Command::new("bash")
            .arg(script("testbed/endpoint.sh"))
            .args(["run".as_ref(), dir.as_os_str(), name.as_ref()])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("bash runs endpoint.sh");
        Endpoint { name: name.to_string(), dir, run, boot_time: Duration::ZERO }
    }

    /// Waits until systemd inside says its start-up finished (running, or degraded).
    pub fn wait_up(&mut self) {
        let waited = Command::new("bash")
            .arg(script("testbed/endpoint.sh"))
            .args(["wait".as_ref(), self.dir.as_os_str()])
            .output()
            .expect("bash runs endpoint.sh");
        assert!(
            waited.status.success(),
            "{} did not boot: {}\n{}",
            self.name,
            String::from_utf8_lossy(&waited.stderr),
            self.console()
        );
    }

    /// What systemd-nspawn printed (the boot messages), for failure messages.
    pub fn console(&self) -> String {
        std::fs::read_to_string(self.dir.join("console.log")).unwrap_or_default()
    }

    /// Runs a command inside the endpoint.
    pub fn exec(&self, args: &[&str]) -> Output {
        Command::new("bash")
            .arg(script("testbed/endpoint.sh"))
            .args(["exec".as_ref(), self.dir.as_os_str()])
            .args(args)
            .output()
            .expect("bash runs endpoint.sh")
    }

    /// Runs a command inside the endpoint that must succeed; its standard output.
    pub fn run(&self, args: &[&str]) -> String {
        let out = self.exec(args);
        assert!(
            out.status.success(),
            "{}: `{}` failed: {}{}",
            self.name,
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// A file of the endpoint's, as the host sees it through the mounted root.
    pub fn file(&self, path: &str) -> PathBuf {
        self.dir.join("root").join(path.trim_start_matches('/'))
    }

    /// Installs the agent's package the way a fleet does: its settings first, then `apt-get
    /// install` of the `.deb`, which enables the service and starts it.
    pub fn install_agent(&self, server: &Server, enroll_token: &str) {
        let settings = format!(
            "TOOLGATE_SERVER=http://{}\nTOOLGATE_ENROLL_TOKEN={enroll_token}\nTOOLGATE_RECONNECT_SPREAD_MS=200\nTOOLGATE_RECONNECT_MAX_MS=1000\n",
            server.agents
        );
        std::fs::create_dir_all(self.file("/etc/toolgate")).unwrap();
        std::fs::write(self.file("/etc/toolgate/agent.env"), settings).unwrap();
        self.install(&packages().agent);
    }

    /// `apt-get install` of a package file, copied into the endpoint first.
    pub fn install(&self, deb: &Path) {
        let inside = format!("/root/{}", deb.file_name().unwrap().to_str().unwrap());
        std::fs::copy(deb, self.file(&inside)).unwrap();
        self.run(&["apt-get", "install", "-y", "-q", "--no-install-recommends", &inside]);
    }

    /// Reboots from inside (`systemctl reboot`) and waits until it is up again.
    pub fn reboot(&mut self) {
        let before = self.leader();
        let _ = self.exec(&["systemctl", "reboot"]);
        let deadline = Instant::now() + PATIENCE;
        while self.leader().is_none_or(|pid| Some(pid) == before) {
            assert!(Instant::now() < deadline, "{} did not come back from its reboot:\n{}", self.name, self.console());
            std::thread::sleep(Duration::from_millis(100));
        }
        self.wait_up();
    }

    /// The running systemd-nspawn's process id (a new one after each reboot).
    fn leader(&self) -> Option<u32> {
        std::fs::read_to_string(self.dir.join("nspawn.pid")).ok()?.trim().parse().ok()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // SIGTERM: endpoint.sh powers the endpoint off and unmounts its root.
        let _ = Command::new("kill").arg(self.run.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if self.run.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.run.kill();
        let _ = self.run.wait();
    }
}

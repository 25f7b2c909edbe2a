//! A local apt repository for the test bed's endpoints: test packages built with `dpkg-deb`,
//! published as a flat repository served over HTTP on 127.0.0.1 (the endpoints share the
//! host's loopback), publishable again with newer versions.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::testbed::Endpoint;

/// A package of nothing but its control file: `toolgate-probe` at `version`.
pub fn probe_package(dir: &Path, version: &str) -> PathBuf {
    let root = dir.join(format!("probe-{version}"));
    std::fs::create_dir_all(root.join("DEBIAN")).unwrap();
    let control = format!(
        "Package: toolgate-probe\nVersion: {version}\nArchitecture: all\nMaintainer: tests <tests@localhost>\nDescription: a package the tests upgrade\n"
    );
    std::fs::write(root.join("DEBIAN/control"), control).unwrap();
    built(&root, dir.join(format!("toolgate-probe_{version}_all.deb")))
}

/// `toolgate-probe` at `version` as a program: `/usr/bin/toolgate-probe` (a copy of `yes`,
/// which keeps a CPU busy) run as `workers` processes by the service `toolgate-probe`, which
/// the package (re)starts when it is installed or upgraded, as a daemon's package does.
pub fn program_package(dir: &Path, version: &str, workers: usize) -> PathBuf {
    let root = dir.join(format!("program-{version}"));
    for sub in ["DEBIAN", "usr/bin", "lib/systemd/system"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    let control = format!(
        "Package: toolgate-probe\nVersion: {version}\nArchitecture: all\nMaintainer: tests <tests@localhost>\nDescription: a program the tests upgrade\n"
    );
    std::fs::write(root.join("DEBIAN/control"), control).unwrap();
    std::fs::copy("/usr/bin/yes", root.join("usr/bin/toolgate-probe")).unwrap();
    let each = "/usr/bin/toolgate-probe > /dev/null &\n".repeat(workers);
    let run = format!("#!/bin/sh\n{each}wait\n");
    let postinst = "#!/bin/sh\nset -e\nsystemctl daemon-reload\nsystemctl restart toolgate-probe.service\n";
    let prerm = "#!/bin/sh\nif [ \"$1\" = remove ]; then systemctl stop toolgate-probe.service || true; fi\n";
    for (file, text) in
        [("usr/bin/toolgate-probe-run", run.as_str()), ("DEBIAN/postinst", postinst), ("DEBIAN/prerm", prerm)]
    {
        std::fs::write(root.join(file), text).unwrap();
        std::fs::set_permissions(root.join(file), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let unit = "[Service]\nExecStart=/usr/bin/toolgate-probe-run\n";
    std::fs::write(root.join("lib/systemd/system/toolgate-probe.service"), unit).unwrap();
    built(&root, dir.join(format!("toolgate-probe_{version}_all.deb")))
}

/// The package of the tree at `root`, built as `deb`.
fn built(root: &Path, deb: PathBuf) -> PathBuf {
    let out = Command::new("dpkg-deb").args(["--root-owner-group", "--build"]).arg(root).arg(&deb).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    deb
}

/// The flat repository and its HTTP server (stopped when dropped).
pub struct Repository {
    server: Child,
    pub port: u16,
    dir: PathBuf,
}

impl Drop for Repository {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8(out.stdout).unwrap().split_whitespace().next().unwrap().to_string()
}

impl Repository {
    /// Serves `dir/repo`, offering `debs`.
    pub fn serve(dir: &Path, debs: &[&Path]) -> Repository {
        let repo = dir.join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let server = Command::new("python3")
            .args(["-m", "http.server", "--bind", "127.0.0.1", &port.to_string(), "--directory"])
            .arg(&repo)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Held from here on, so that a failed wait below still stops it.
        let repository = Repository { server, port, dir: repo };
        repository.publish(debs);
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return repository;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the test repository did not start on port {port}");
    }

    /// Offers exactly `debs` from now on (an endpoint sees them after its `apt-get update`).
    pub fn publish(&self, debs: &[&Path]) {
        let mut index = String::new();
        for deb in debs {
            let name = deb.file_name().unwrap().to_str().unwrap();
            std::fs::copy(deb, self.dir.join(name)).unwrap();
            let fields = Command::new("dpkg-deb").args(["--field"]).arg(deb).output().unwrap();
            let size = std::fs::metadata(deb).unwrap().len();
            let fields = String::from_utf8(fields.stdout).unwrap();
            index.push_str(&format!("{fields}Filename: ./{name}\nSize: {size}\nSHA256: {}\n\n", sha256(deb)));
        }
        let packages = self.dir.join("Packages");
        std::fs::write(&packages, index).unwrap();
        let release = format!(
            "Origin: toolgate-tests\nLabel: toolgate-tests\nSuite: probe\nCodename: probe\nDate: Thu, 03 Dec 2026 00:00:00 UTC\nSHA256:\n {} {} Packages\n",
            sha256(&packages),
            std::fs::metadata(&packages).unwrap().len()
        );
        std::fs::write(self.dir.join("Release"), release).unwrap();
    }

    /// Makes this repository `endpoint`'s only source, and reads it there.
    pub fn use_on(&self, endpoint: &Endpoint) {
        let source = format!("deb [trusted=yes] http://127.0.0.1:{}/ ./\n", self.port);
        std::fs::write(endpoint.file("/etc/apt/sources.list"), source).unwrap();
        self.update_on(endpoint);
    }

    /// `apt-get update` on `endpoint`, its copy of this repository's lists dropped first: two
    /// publications within one second look unchanged to an If-Modified-Since (the HTTP
    /// server's times are in seconds), and apt would keep the older lists.
    pub fn update_on(&self, endpoint: &Endpoint) {
        // apt names them after the address, with `:` escaped (127.0.0.1%3aPORT_._Packages).
        endpoint.run(&["sh", "-c", "rm -f /var/lib/apt/lists/127.0.0.1*"]);
        let left = endpoint.run(&["sh", "-c", "ls /var/lib/apt/lists | grep -c '^127.0.0.1' || true"]);
        assert_eq!(left.trim(), "0", "the repository's lists were not dropped");
        endpoint.run(&["apt-get", "update", "-q"]);
        let fetched = endpoint.run(&["sh", "-c", "ls /var/lib/apt/lists | grep -c '^127.0.0.1' || true"]);
        assert_ne!(fetched.trim(), "0", "apt-get update fetched nothing from the repository");
    }
}

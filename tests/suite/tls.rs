//! HTTPS against the real binary, with certificates the test makes (rcgen): the server serves
//! its pair and reloads it on SIGHUP; agents verify the server against a pinned CA and refuse
//! another; the local agent trusts exactly the certificate its server serves.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::tls::{ca, client, https, leaf};
use common::{Server, start_logging_to};

const PATIENCE: Duration = Duration::from_secs(60);

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn agent(s: &Server, ca: &str, state: &Path, enroll: &str) -> (Child, std::path::PathBuf) {
    let log = state.with_extension("log");
    let child = Command::new(common::bin())
        .args(["agent", "run", "--server", &format!("https://localhost:{}", s.addr.port()), "--ca", ca])
        .args(["--enroll-token", enroll, "--reconnect-spread-ms", "200", "--reconnect-max-ms", "1000", "--state-dir"])
        .arg(state)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    (child, log)
}

fn connected_agents(s: &Server, config: &Arc<rustls::ClientConfig>, api: &str) -> f64 {
    let (status, body, _) = https(s.addr, config, "/metrics", Some(api));
    assert_eq!(status, 200, "{body}");
    let line = body.lines().find(|l| l.starts_with("toolgate_agents_connected ")).unwrap();
    line.rsplit_once(' ').unwrap().1.parse().unwrap()
}

fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "{what} did not happen within {PATIENCE:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn https_served_verified_by_agents_and_reloaded_on_sighup() {
    let files = tempfile::tempdir().unwrap();
    let trusted = ca("toolgate test CA");
    let other = ca("some other CA");
    let ca_pem = write(files.path(), "ca.pem", &trusted.pem());
    let other_pem = write(files.path(), "other.pem", &other.pem());
    // No name for 127.0.0.1: the local agent still connects (it pins the served certificate).
    let (chain, key, first) = leaf(&trusted, &["localhost", "toolgate.test"]);
    let cert_path = write(files.path(), "server.pem", &chain);
    let key_path = write(files.path(), "server.key", &key);
    let logs = tempfile::tempdir().unwrap();
    let extra = ["--tls-cert", cert_path.as_str(), "--tls-key", key_path.as_str(), "--local-agent"];
    let s = start_logging_to(tempfile::tempdir().unwrap(), &extra, &[], Some(logs.path()));
    let config = client(&trusted.pem());
    let (status, _, presented) = https(s.addr, &config, "/healthz", None);
    assert_eq!((status, presented), (200, first));
    // Plain HTTP on the TLS port gets no HTTP answer.
    let mut plain = TcpStream::connect(s.addr).unwrap();
    plain.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    plain.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    assert!(!answer.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));

    let api = common::api_credential(&s, "ops");
    eventually("the local agent connecting over TLS", || connected_agents(&s, &config, &api) == 1.0);
    let states = tempfile::tempdir().unwrap();
    let enroll = common::agents::mint(&s, &["--uses", "2"]);
    let (mut pinned, _) = agent(&s, &ca_pem, &states.path().join("pinned"), &enroll);
    eventually("an agent that trusts the server's CA connecting", || connected_agents(&s, &config, &api) == 2.0);
    let (mut stranger, stranger_log) = agent(&s, &other_pem, &states.path().join("stranger"), &enroll);
    eventually("an agent that trusts another CA refusing the server", || {
        std::fs::read_to_string(&stranger_log).unwrap_or_default().contains("invalid peer certificate")
    });
    assert_eq!(connected_agents(&s, &config, &api), 2.0);
    assert!(!states.path().join("stranger").join("agent.json").exists(), "it never enrolled");

    // SIGHUP: a new pair serves the next handshakes; a broken file leaves the last good pair.
    let (chain, key, second) = leaf(&trusted, &["localhost"]);
    write(files.path(), "server.pem", &chain);
    write(files.path(), "server.key", &key);
    let hangup = || assert!(Command::new("kill").args(["-HUP", &s.pid().to_string()]).status().unwrap().success());
    hangup();
    eventually("the new certificate being served", || https(s.addr, &config, "/healthz", None).2 == second);
    write(files.path(), "server.pem", "not a certificate\n");
    hangup();
    eventually("the failed reload being logged", || {
        std::fs::read_to_string(logs.path().join("stderr")).unwrap_or_default().contains("was not reloaded")
    });
    assert_eq!(https(s.addr, &config, "/healthz", None).2, second, "the previous pair stays");
    for child in [&mut pinned, &mut stranger] {
        let _ = child.kill();
        let _ = child.wait();
    }
}

#[test]
fn a_bad_pair_stops_the_start_and_plain_http_off_loopback_is_warned_about() {
    let files = tempfile::tempdir().unwrap();
    let trusted = ca("toolgate test CA");
    let (chain, _, _) = leaf(&trusted, &["localhost"]);
    let (_, other_key, _) = leaf(&trusted, &["localhost"]);
    let cert = write(files.path(), "server.pem", &chain);
    let key = write(files.path(), "wrong.key", &other_key);
    let data = tempfile::tempdir().unwrap();
    let serve = |args: &[&str]| {
        Command::new(common::bin()).arg("serve").arg("--data-dir").arg(data.path()).args(args).output().unwrap()
    };
    let out = serve(&["--listen", "127.0.0.1:0", "--tls-cert", &cert, "--tls-key", &key]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("does not fit") && stderr.contains("wrong.key"), "{stderr}");
    let out = serve(&["--listen", "127.0.0.1:0", "--tls-cert", &cert]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("--tls-key"), "{stderr}");

    let logs = tempfile::tempdir().unwrap();
    let s = start_logging_to(tempfile::tempdir().unwrap(), &["--listen", "0.0.0.0:0"], &[], Some(logs.path()));
    eventually("the warning", || {
        std::fs::read_to_string(logs.path().join("stderr"))
            .unwrap_or_default()
            .contains("serves plain HTTP beyond this machine")
    });
    drop(s);
}

//! Agents' client certificates against the real binary and real agents (docs/trust.md): the
//! agent makes its key and asks at enrollment; its certificate names its agent id and chains to
//! the server's CA; it asks again past half the lifetime; an agent enrolled on a server without
//! a CA gets one on its first connection after the server has one; the CA's key is never in
//! the database in the clear.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::agents::*;
use common::trust::{held, issued, kek_file, wait_issued};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};

#[test]
fn an_agent_enrolls_with_a_certificate_of_its_own_and_renews_it() {
    let keys = tempfile::tempdir().unwrap();
    let kek = kek_file(keys.path());
    let s = common::start(&[FAST, &["--kek-file", &kek, "--agent-cert-lifetime", "10"]].concat());
    let schemas = output_schemas(&s);
    let states = tempfile::tempdir().unwrap();
    let state_dir = states.path().join("cert-host");
    let mut agent = spawn_agent(&s, Some(&mint(&s, &["--uses", "1"])), &state_dir, Some("cert-host"));
    let agent_id = online_by_hostname(&s, &schemas, 1)["cert-host"].clone();
    let listed = wait_issued(&s, 1);
    let first = &listed["certificates"][0];
    assert_eq!((first["agent_id"].as_str(), first["reason"].as_str()), (Some(agent_id.as_str()), Some("enrollment")));

    let kept = held(&state_dir);
    let leaf = CertificateDer::from_pem_slice(kept["pem"].as_str().unwrap().as_bytes()).unwrap();
    let uri = format!("urn:toolgate:agent:{agent_id}");
    assert!(leaf.windows(uri.len()).any(|w| w == uri.as_bytes()), "the certificate names the agent");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(kept["ca_pem"].as_str().unwrap().as_bytes()).unwrap()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider).build().unwrap();
    verifier.verify_client_cert(&leaf, &[], UnixTime::now()).expect("a client certificate of the server's CA");
    assert!(kept["key_pem"].as_str().unwrap().contains("PRIVATE KEY"), "the agent keeps the key it made");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(state_dir.join("certificate.json")).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "owner-only");

    // Past half its ten-second life, the agent's next connection asks again, with a new key.
    std::thread::sleep(Duration::from_secs(6));
    agent.kill();
    let _agent = spawn_agent(&s, None, &state_dir, Some("cert-host"));
    let listed = wait_issued(&s, 2);
    assert_eq!(listed["certificates"][0]["reason"], "renewal", "{listed}");
    let renewed = held(&state_dir);
    assert_ne!(renewed["key_pem"], kept["key_pem"], "a renewal is a new key");
    assert_eq!(renewed["ca_pem"], kept["ca_pem"], "signed by the same CA");

    let data = s.stop();
    let database = std::fs::read(data.path().join("toolgate.sqlite3")).unwrap();
    assert!(!database.windows(11).any(|w| w == b"PRIVATE KEY"), "the CA's key is sealed in the database");
}

#[test]
fn an_agent_enrolled_before_the_server_had_a_ca_gets_a_certificate_next_time() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let s = common::start(&[FAST, &["--listen", &addr]].concat());
    let schemas = output_schemas(&s);
    let states = tempfile::tempdir().unwrap();
    let state_dir = states.path().join("old-host");
    let _agent = spawn_agent(&s, Some(&mint(&s, &["--uses", "1"])), &state_dir, Some("old-host"));
    online_by_hostname(&s, &schemas, 1);
    assert_eq!(issued(&s)["total"], 0, "no key-encryption key, no CA, no certificates");
    assert!(!state_dir.join("certificate.json").exists());
    let keys = tempfile::tempdir().unwrap();
    let kek = kek_file(keys.path());
    let s = common::start_in(s.stop(), &[FAST, &["--listen", &addr, "--kek-file", &kek]].concat());
    let listed = wait_issued(&s, 1);
    assert_eq!(listed["certificates"][0]["reason"], "renewal", "{listed}");
    let deadline = Instant::now() + PATIENCE;
    while !state_dir.join("certificate.json").exists() {
        assert!(Instant::now() < deadline, "the agent kept its certificate");
        std::thread::sleep(Duration::from_millis(100));
    }
}

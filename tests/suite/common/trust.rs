//! The agent CA in tests (docs/trust.md): a key-encryption key to seal it, the certificates it
//! issued, what an agent keeps, and an agent's hello by hand over the agent listener's TLS,
//! with a client certificate or without.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::{Value, json};

use super::agents::PATIENCE;
use super::{Server, call_as};

/// A key-encryption key file (version 1) in `dir`: its path.
pub fn kek_file(dir: &Path) -> String {
    let out = std::process::Command::new(super::bin()).args(["kek", "generate", "--version", "1"]).output().unwrap();
    let path = dir.join("kek.txt");
    std::fs::write(&path, out.stdout).unwrap();
    path.display().to_string()
}

/// `toolgate serve`'s flags for an agent listener at `agents` with mutual TLS: `tls`'s
/// `localhost` pair of its own, a CA sealed under `kek`, revocations read every 200 ms. MCP
/// stays plain HTTP.
pub fn mutual_tls_flags(tls: &super::tls::Localhost, kek: &str, agents: &str) -> Vec<String> {
    let (cert, key) = (tls.cert.display().to_string(), tls.key.display().to_string());
    let flags = ["--kek-file", kek, "--agent-listen", agents, "--agent-tls-cert", &cert, "--agent-tls-key", &key];
    let flags = flags.iter().chain(&["--cert-revocation-check-ms", "200"]);
    flags.map(|f| f.to_string()).collect()
}

/// `list_issued_certs` as the demo token.
pub fn issued(s: &Server) -> Value {
    let answer = call_as(s, &s.token, "list_issued_certs", json!({})).json();
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    answer["result"]["structuredContent"].clone()
}

/// Waits until `count` certificates were issued; the list.
pub fn wait_issued(s: &Server, count: u64) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let listed = issued(s);
        if listed["total"].as_u64() >= Some(count) {
            return listed;
        }
        assert!(Instant::now() < deadline, "fewer than {count} certificates issued: {listed}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The certificate an agent keeps (certificate.json in its state dir).
pub fn held(state_dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(state_dir.join("certificate.json")).unwrap()).unwrap()
}

/// Waits until the agent keeps a certificate other than `previous` (its PEM); what it keeps.
pub fn wait_held_other_than(state_dir: &Path, previous: Option<&str>) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let path = state_dir.join("certificate.json");
        if let Some(kept) = std::fs::read_to_string(&path).ok().and_then(|t| serde_json::from_str::<Value>(&t).ok())
            && kept["pem"].as_str() != previous
        {
            return kept;
        }
        assert!(Instant::now() < deadline, "{} holds no new certificate", state_dir.display());
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub type TlsSocket = tungstenite::WebSocket<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>;

/// A session hello by hand as the agent in `state_dir`, over TLS to `localhost` at `addr`
/// trusting `ca_pem`, presenting `client` (a kept certificate, as [`held`] reads it) or none.
/// The server's first answer; Err when TLS or the upgrade failed (a refused certificate).
pub fn tls_hello(addr: SocketAddr, ca_pem: &str, state_dir: &Path, client: Option<&Value>) -> Result<Value, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions().unwrap();
    let builder = builder.with_root_certificates(roots);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some(kept) => {
            let chain = vec![CertificateDer::from_pem_slice(kept["pem"].as_str().unwrap().as_bytes()).unwrap()];
            let key = PrivateKeyDer::from_pem_slice(kept["key_pem"].as_str().unwrap().as_bytes()).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
    };
    let name = ServerName::try_from("localhost").unwrap();
    let connection = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let tls = rustls::StreamOwned::new(connection, stream);
    let (mut socket, _): (TlsSocket, _) =
        tungstenite::client(format!("wss://localhost:{}/agent/v1", addr.port()), tls).map_err(|e| e.to_string())?;
    let identity: Value =
        serde_json::from_str(&std::fs::read_to_string(state_dir.join("agent.json")).unwrap()).unwrap();
    let hello = json!({
        "type": "hello", "protocol": 2, "agent_id": identity["agent_id"], "credential": identity["credential"],
        "agent_version": "test", "purpose": "session",
    });
    socket.send(tungstenite::Message::text(hello.to_string())).map_err(|e| e.to_string())?;
    loop {
        match socket.read().map_err(|e| e.to_string())? {
            tungstenite::Message::Text(text) => return Ok(serde_json::from_str(&text).unwrap()),
            tungstenite::Message::Close(frame) => return Err(format!("closed: {frame:?}")),
            _ => continue,
        }
    }
}

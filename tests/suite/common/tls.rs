//! HTTPS for the tests: certificates made here (rcgen), a client that trusts a given CA, and
//! one request over TLS.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

pub fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

/// A server certificate for `names` signed by `issuer`: (chain PEM, key PEM, leaf DER).
pub fn leaf(issuer: &CertifiedIssuer<'static, KeyPair>, names: &[&str]) -> (String, String, Vec<u8>) {
    let key = KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let cert = CertificateParams::new(names).unwrap().signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem(), cert.der().to_vec())
}

pub fn client(ca_pem: &str) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    // Full handshakes only: a resumed session presents no certificate to compare.
    config.resumption = rustls::client::Resumption::disabled();
    Arc::new(config)
}

/// One HTTPS request to `localhost` at `addr`: the status, the body and the leaf certificate
/// the server presented.
pub fn https(
    addr: SocketAddr,
    config: &Arc<rustls::ClientConfig>,
    path: &str,
    token: Option<&str>,
) -> (u16, String, Vec<u8>) {
    https_request(addr, config, "GET", path, token, None)
}

/// One HTTPS request with a method and a JSON body (an MCP call at 2025-11-25).
pub fn https_request(
    addr: SocketAddr,
    config: &Arc<rustls::ClientConfig>,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, String, Vec<u8>) {
    let name = ServerName::try_from("localhost").unwrap();
    let connection = rustls::ClientConnection::new(config.clone(), name).unwrap();
    let socket = TcpStream::connect(addr).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut tls = rustls::StreamOwned::new(connection, socket);
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let body_headers = body.map_or(String::new(), |b| {
        format!("Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\n", b.len())
    });
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{auth}{body_headers}\r\n{}",
        body.unwrap_or_default()
    );
    tls.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    // A peer that closes without close_notify ends the read with an error after the answer.
    let _ = tls.read_to_end(&mut answer);
    let presented = tls.conn.peer_certificates().unwrap()[0].to_vec();
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no HTTP answer: {text:?}"));
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, body.to_string(), presented)
}

/// A test CA and a `localhost` certificate it signed, written to a directory of their own, with
/// a client that trusts the CA.
pub struct Localhost {
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
    pub ca: std::path::PathBuf,
    pub client: Arc<rustls::ClientConfig>,
    _dir: tempfile::TempDir,
}

impl Localhost {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let authority = ca("toolgate test CA");
        let (chain, key, _) = leaf(&authority, &["localhost"]);
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let (cert, key, ca) =
            (write("server.pem", &chain), write("server.key", &key), write("ca.pem", &authority.pem()));
        Localhost { cert, key, ca, client: client(&authority.pem()), _dir: dir }
    }

    /// `toolgate serve`'s flags for it.
    pub fn serve_args(&self) -> Vec<String> {
        vec!["--tls-cert".into(), self.cert.display().to_string(), "--tls-key".into(), self.key.display().to_string()]
    }

    /// A `tools/call` over HTTPS that must succeed: its structured result.
    pub fn tool(&self, addr: SocketAddr, token: &str, tool: &str, arguments: serde_json::Value) -> serde_json::Value {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
        let (status, text, _) = https_request(addr, &self.client, "POST", "/mcp", Some(token), Some(&body.to_string()));
        let answer: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{status} {text}"));
        assert_eq!(answer["result"]["isError"], false, "{tool}: {answer}");
        answer["result"]["structuredContent"].clone()
    }
}

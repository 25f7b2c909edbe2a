//! Reaching the server: its agent endpoint's URL, and for an https:// server the TLS
//! configuration that checks its certificate: against the system's trusted roots, against one
//! pinned CA (`--ca`), or as the embedding process says (the server's in-process local agent).

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio_tungstenite::Connector;
use toolgate_domain::fleet::wire::AGENT_PATH;

use crate::AgentError;

/// Whom the agent trusts for an https:// server's certificate.
#[derive(Clone, Debug, Default)]
pub enum ServerTrust {
    /// The system's trusted roots (/etc/ssl/certs and the like).
    #[default]
    System,
    /// Only this CA (PEM; every certificate in the file is trusted).
    Ca(PathBuf),
    /// A configuration made by the caller.
    Config(Arc<rustls::ClientConfig>),
}

/// The server's agent endpoint and how to connect to it.
#[derive(Clone)]
pub struct Endpoint {
    pub url: String,
    connector: Option<Connector>,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

impl Endpoint {
    /// `http://host:port` (or ws://) in plain text; `https://host:port` (or wss://) with TLS.
    pub fn new(server: &str, trust: &ServerTrust) -> Result<Self, AgentError> {
        let bad = || AgentError::BadServerUrl(server.to_string());
        let (scheme, rest) = server.split_once("://").ok_or_else(bad)?;
        let secure = match scheme {
            "http" | "ws" => false,
            "https" | "wss" => true,
            _ => return Err(bad()),
        };
        let host = rest.trim_end_matches('/');
        if host.is_empty() || host.contains('/') {
            return Err(bad());
        }
        let url = format!("{}://{host}{AGENT_PATH}", if secure { "wss" } else { "ws" });
        let connector = match secure {
            true => Some(Connector::Rustls(client_config(trust)?)),
            false => None,
        };
        Ok(Self { url, connector })
    }

    pub async fn connect(&self) -> Result<crate::connection::Socket, tokio_tungstenite::tungstenite::Error> {
        // `true`: TCP_NODELAY, so a small frame (a heartbeat, a result) is not held back by
        // Nagle's algorithm waiting for the server's ACK.
        let (socket, _) =
            tokio_tungstenite::connect_async_tls_with_config(&self.url, None, true, self.connector.clone()).await?;
        Ok(socket)
    }
}

fn client_config(trust: &ServerTrust) -> Result<Arc<rustls::ClientConfig>, AgentError> {
    let tls = |message: String| AgentError::Tls(message);
    let mut roots = rustls::RootCertStore::empty();
    match trust {
        ServerTrust::Config(config) => return Ok(config.clone()),
        ServerTrust::Ca(path) => {
            let file = path.display();
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| tls(format!("--ca {file}: {e}")))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| tls(format!("--ca {file}: {e}")))?;
            if certs.is_empty() {
                return Err(tls(format!("--ca {file}: no PEM certificate in it")));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| tls(format!("--ca {file}: {e}")))?;
            }
        }
        ServerTrust::System => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(tls(format!(
                    "no trusted root certificate found on this system ({} error(s) reading them); install ca-certificates or pass --ca",
                    found.errors.len()
                )));
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_endpoint_urls() {
        let url = |s: &str| Endpoint::new(s, &ServerTrust::System).map(|e| e.url);
        assert_eq!(url("http://127.0.0.1:8080").unwrap(), "ws://127.0.0.1:8080/agent/v1");
        assert_eq!(url("ws://h:1/").unwrap(), "ws://h:1/agent/v1");
        assert!(url("127.0.0.1:8080").is_err());
        assert!(url("http://h:1/path").is_err());
        assert!(url("ftp://h:1").is_err());
    }

    #[test]
    fn a_ca_file_without_certificates_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let Err(e) = Endpoint::new("https://h:1", &ServerTrust::Ca(path.clone())) else { panic!("accepted") };
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        let Err(e) = Endpoint::new("https://h:1", &ServerTrust::Ca(dir.path().join("missing.pem"))) else {
            panic!("accepted")
        };
        assert!(e.to_string().contains("missing.pem"), "{e}");
    }
}

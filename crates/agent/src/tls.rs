//! Reaching the server: its agent endpoint's URL, and for an https:// server the TLS
//! configuration that checks its certificate: against the system's trusted roots, against one
//! pinned CA (`--ca`), or as the embedding process says (the server's in-process local agent).
//! Over TLS the agent presents the client certificate it holds, while it is valid
//! (docs/trust.md): the agent listener with mutual TLS asks for it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_tungstenite::Connector;
use toolgate_domain::fleet::wire::AGENT_PATH;

use crate::AgentError;
use crate::certificate::{self, Held};

/// Whom the agent trusts for an https:// server's certificate.
#[derive(Clone, Debug, Default)]
pub enum ServerTrust {
    /// The system's trusted roots (/etc/ssl/certs and the like).
    #[default]
    System,
    /// Only this CA (PEM; every certificate in the file is trusted).
    Ca(PathBuf),
    /// A verifier made by the caller.
    Verifier(Arc<dyn ServerCertVerifier>),
}

/// How the server's certificate is checked.
#[derive(Clone, Debug)]
enum ServerCheck {
    Roots(Arc<rustls::RootCertStore>),
    Verifier(Arc<dyn ServerCertVerifier>),
}

/// The server's agent endpoint and how to connect to it.
#[derive(Clone)]
pub struct Endpoint {
    pub url: String,
    secure: Option<Secure>,
}

/// An https:// endpoint: the server check, where the client certificate is kept, and the
/// connector made for the certificate last presented (made again when it changes).
#[derive(Clone)]
struct Secure {
    check: ServerCheck,
    state_dir: Option<PathBuf>,
    made: Arc<Mutex<Option<Made>>>,
}

/// A connector, and the certificate (PEM) it presents, if any.
type Made = (Option<String>, Connector);

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

impl Endpoint {
    /// `http://host:port` (or ws://) in plain text; `https://host:port` (or wss://) with TLS,
    /// presenting the certificate kept in `state_dir` when there is one.
    pub fn new(server: &str, trust: &ServerTrust, state_dir: Option<&Path>) -> Result<Self, AgentError> {
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
        let secure = match secure {
            true => Some(Secure {
                check: server_check(trust)?,
                state_dir: state_dir.map(Path::to_path_buf),
                made: Arc::default(),
            }),
            false => None,
        };
        Ok(Self { url, secure })
    }

    pub async fn connect(&self) -> Result<crate::connection::Socket, tokio_tungstenite::tungstenite::Error> {
        let connector = self.secure.as_ref().map(Secure::connector).transpose().map_err(|e| {
            tokio_tungstenite::tungstenite::Error::Io(std::io::Error::other(format!("TLS configuration: {e}")))
        })?;
        // `true`: TCP_NODELAY, so a small frame (a heartbeat, a result) is not held back by
        // Nagle's algorithm waiting for the server's ACK.
        let (socket, _) = tokio_tungstenite::connect_async_tls_with_config(&self.url, None, true, connector).await?;
        Ok(socket)
    }
}

impl Secure {
    /// The connector for the certificate held now: presented while valid, none once expired
    /// (the server then lets the agent ask for a new one).
    fn connector(&self) -> Result<Connector, String> {
        let now = crate::connection::now_ms();
        let held = self.state_dir.as_deref().and_then(certificate::load).filter(|h| h.not_after_ms > now);
        let key = held.as_ref().map(|h| h.pem.clone());
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((presented, connector)) = made.as_ref()
            && *presented == key
        {
            return Ok(connector.clone());
        }
        let config = match client_config(&self.check, held.as_ref()) {
            Ok(config) => config,
            Err(e) => {
                tracing::warn!("cannot present the client certificate ({e}); connecting without it");
                client_config(&self.check, None)?
            }
        };
        let connector = Connector::Rustls(config);
        *made = Some((key, connector.clone()));
        Ok(connector)
    }
}

fn server_check(trust: &ServerTrust) -> Result<ServerCheck, AgentError> {
    let tls = |message: String| AgentError::Tls(message);
    let mut roots = rustls::RootCertStore::empty();
    match trust {
        ServerTrust::Verifier(verifier) => return Ok(ServerCheck::Verifier(verifier.clone())),
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
    let check = ServerCheck::Roots(Arc::new(roots));
    // Made once now, so that a configuration that cannot be made fails at start.
    client_config(&check, None).map_err(tls)?;
    Ok(check)
}

fn client_config(check: &ServerCheck, held: Option<&Held>) -> Result<Arc<rustls::ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match check {
        ServerCheck::Roots(roots) => builder.with_root_certificates(roots.clone()),
        ServerCheck::Verifier(verifier) => builder.dangerous().with_custom_certificate_verifier(verifier.clone()),
    };
    let config = match held {
        None => builder.with_no_client_auth(),
        Some(held) => {
            let chain = vec![CertificateDer::from_pem_slice(held.pem.as_bytes()).map_err(|e| e.to_string())?];
            let key = PrivateKeyDer::from_pem_slice(held.key_pem.as_bytes()).map_err(|e| e.to_string())?;
            builder.with_client_auth_cert(chain, key).map_err(|e| e.to_string())?
        }
    };
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_endpoint_urls() {
        let url = |s: &str| Endpoint::new(s, &ServerTrust::System, None).map(|e| e.url);
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
        let Err(e) = Endpoint::new("https://h:1", &ServerTrust::Ca(path.clone()), None) else { panic!("accepted") };
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        let Err(e) = Endpoint::new("https://h:1", &ServerTrust::Ca(dir.path().join("missing.pem")), None) else {
            panic!("accepted")
        };
        assert!(e.to_string().contains("missing.pem"), "{e}");
    }
}

//! The agent listener's mutual TLS (docs/trust.md): the server's certificate as on every
//! listener, and client certificates verified against the agent CA (rustls
//! `WebPkiClientVerifier`). A connection may come without one, for enrollment and for an agent
//! that holds none usable; the hello decides ([`toolgate_fleet::session::handshake`]), so the
//! certificate that came is handed on as a [`PeerCertificate`].

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::server::{ResolvesServerCert, WebPkiClientVerifier};
use tokio_rustls::TlsAcceptor;
use toolgate_domain::certs::AGENT_URI_PREFIX;
use toolgate_fleet::{PeerCertificate, PresentedCertificate};
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

/// The parts of an agent certificate the server acts on.
fn read_presented(der: &[u8]) -> Result<PresentedCertificate, String> {
    let (_, cert) = X509Certificate::from_der(der).map_err(|e| format!("unreadable certificate: {e}"))?;
    let serial_hex = toolgate_domain::secrets::hex(cert.raw_serial());
    let not_after_ms = cert.validity().not_after.timestamp().saturating_mul(1000);
    let names = cert.subject_alternative_name().map_err(|e| e.to_string())?;
    let agent_id = names
        .iter()
        .flat_map(|san| san.value.general_names.iter())
        .find_map(|name| match name {
            GeneralName::URI(uri) => uri.strip_prefix(AGENT_URI_PREFIX),
            _ => None,
        })
        .ok_or("the certificate names no agent (no urn:toolgate:agent: URI)")?;
    Ok(PresentedCertificate { agent_id: agent_id.to_string(), serial_hex, not_after_ms })
}

/// What the agent presented on `connection`, as the hello will judge it.
pub fn peer_certificate(connection: &rustls::ServerConnection) -> PeerCertificate {
    match connection.peer_certificates().and_then(|chain| chain.first()) {
        // Verified in the handshake, so it reads; an unreadable one is treated as none.
        Some(leaf) => read_presented(leaf).map_or(PeerCertificate::Absent, PeerCertificate::Presented),
        None => PeerCertificate::Absent,
    }
}

/// The agent listener's acceptor: `served` for the server's certificate, client certificates
/// signed by one of `ca_pems`. A revoked one passes the handshake to be refused at the hello,
/// where the agent is told why and stops (rather than retrying a failed handshake forever).
pub fn acceptor(
    served: Arc<dyn ResolvesServerCert>,
    provider: Arc<CryptoProvider>,
    ca_pems: &[&str],
) -> Result<TlsAcceptor, String> {
    let mut roots = rustls::RootCertStore::empty();
    for pem in ca_pems {
        let der = CertificateDer::from_pem_slice(pem.as_bytes()).map_err(|e| format!("the agent CA: {e}"))?;
        roots.add(der).map_err(|e| format!("the agent CA: {e}"))?;
    }
    let webpki = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| format!("the agent CA cannot verify clients: {e}"))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(webpki)
        .with_cert_resolver(served);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

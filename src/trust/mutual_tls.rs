//! The agent listener's mutual TLS (docs/trust.md): the server's certificate as on every
//! listener, and client certificates verified against the agent CA (rustls
//! `WebPkiClientVerifier`), a revoked serial failing the handshake. A connection may come
//! without one, for enrollment and for an agent that holds none usable; the hello decides
//! ([`toolgate_fleet::session::handshake`]), so the certificate that came is handed on as a
//! [`PeerCertificate`].

use std::sync::Arc;

use rustls::DistinguishedName;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ResolvesServerCert, WebPkiClientVerifier};
use tokio_rustls::TlsAcceptor;
use toolgate_domain::certs::AGENT_URI_PREFIX;
use toolgate_fleet::{PeerCertificate, PresentedCertificate, RevokedSerials};
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

/// The parts of an agent certificate the server acts on.
fn read_presented(der: &[u8]) -> Result<PresentedCertificate, String> {
    let (_, cert) = X509Certificate::from_der(der).map_err(|e| format!("unreadable certificate: {e}"))?;
    let serial_hex = cert.raw_serial().iter().map(|b| format!("{b:02x}")).collect();
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

/// WebPKI's verdict, then the revocation list every replica keeps.
#[derive(Debug)]
struct AgentVerifier {
    webpki: Arc<dyn ClientCertVerifier>,
    revoked: RevokedSerials,
}

impl ClientCertVerifier for AgentVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.webpki.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self.webpki.verify_client_cert(end_entity, intermediates, now)?;
        let presented = read_presented(end_entity).map_err(rustls::Error::General)?;
        match self.revoked.contains(&presented.serial_hex) {
            true => Err(rustls::Error::InvalidCertificate(rustls::CertificateError::Revoked)),
            false => Ok(verified),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// The agent listener's acceptor: `served` for the server's certificate, client certificates
/// signed by one of `ca_pems` and not among `revoked`.
pub fn acceptor(
    served: Arc<dyn ResolvesServerCert>,
    provider: Arc<CryptoProvider>,
    ca_pems: &[&str],
    revoked: RevokedSerials,
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
    let verifier = Arc::new(AgentVerifier { webpki, revoked });
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(served);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

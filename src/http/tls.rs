//! HTTPS (`--tls-cert`, `--tls-key`; the agent listener's own `--agent-tls-cert`, `--agent-tls-key`):
//! rustls with the `ring` provider (no OpenSSL). A pair is read at start (a bad pair stops the
//! server, naming the file) and again on SIGHUP: a good new pair serves every later handshake, a
//! bad one is logged and the previous pair stays.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;
use toolgate_domain::CancellationToken;

use super::listener::ListenerTls;

/// The certificate chain and key files.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The flags' stem errors name (`--tls`: `--tls-cert`, `--tls-key`).
    pub flags: &'static str,
}

/// The pair being served, swapped whole on reload.
#[derive(Debug)]
pub struct ServedCertificate {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
}

impl ServedCertificate {
    pub fn load(files: TlsFiles) -> Result<Arc<Self>, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let current = RwLock::new(Arc::new(read_pair(&files, &provider)?));
        Ok(Arc::new(Self { files, provider, current }))
    }

    /// Reads the files again; on success later handshakes get the new pair.
    pub fn reload(&self) -> Result<(), String> {
        let pair = read_pair(&self.files, &self.provider)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(pair);
        Ok(())
    }

    /// The crypto every TLS configuration of this server uses.
    pub fn provider(&self) -> Arc<CryptoProvider> {
        self.provider.clone()
    }

    /// The leaf certificate served now (DER).
    pub fn leaf(&self) -> CertificateDer<'static> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).cert[0].clone()
    }

    pub fn acceptor(self: &Arc<Self>) -> Result<TlsAcceptor, String> {
        let mut config = rustls::ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

impl ResolvesServerCert for ServedCertificate {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

fn read_pair(files: &TlsFiles, provider: &CryptoProvider) -> Result<CertifiedKey, String> {
    let (cert_file, flags) = (files.cert.display(), files.flags);
    let chain = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| format!("{flags}-cert {cert_file}: {e}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{flags}-cert {cert_file}: {e}"))?;
    if chain.is_empty() {
        return Err(format!(
            "{flags}-cert {cert_file}: no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)"
        ));
    }
    let key_file = files.key.display();
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| {
        format!("{flags}-key {key_file}: no private key read ({e}); expected a PEM PKCS#8, PKCS#1 or SEC1 key")
    })?;
    let pair = CertifiedKey::from_der(chain, key, provider)
        .map_err(|e| format!("{flags}-key {key_file} does not fit {flags}-cert {cert_file}: {e}"))?;
    Ok(pair)
}

/// The agent listener's TLS with `served`: mutual with an agent CA (the certificates of the
/// generations it trusts, PEM); server-authenticated only without a CA; none without a pair.
pub fn agent_listener_tls(
    served: Option<&Arc<ServedCertificate>>,
    ca_pems: &[&str],
) -> Result<Option<ListenerTls>, String> {
    let Some(served) = served else { return Ok(None) };
    let tls = match ca_pems.is_empty() {
        false => ListenerTls {
            acceptor: crate::trust::mutual_tls::acceptor(served.clone(), served.provider(), ca_pems)?,
            client_certificates: true,
        },
        true => ListenerTls::server(served.acceptor()?),
    };
    Ok(Some(tls))
}

/// On every SIGHUP, reads the pair again.
pub async fn reload_on_hangup(served: Arc<ServedCertificate>, stop: CancellationToken) {
    let Ok(mut hangups) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
        tracing::error!("cannot install the SIGHUP handler: the TLS certificate will not be reloaded");
        return;
    };
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = hangups.recv() => match served.reload() {
                Ok(()) => tracing::info!("SIGHUP: TLS certificate reloaded from {}", served.files.cert.display()),
                Err(e) => tracing::error!("SIGHUP: the TLS certificate was not reloaded (the previous one stays): {e}"),
            },
        }
    }
}

/// A verifier that trusts exactly the certificate this server serves now (the in-process
/// local agent's: whatever names the certificate carries, it reaches its own server over
/// loopback, and a reload is followed at the next connection).
pub fn trusting_served(served: Arc<ServedCertificate>) -> Arc<dyn rustls::client::danger::ServerCertVerifier> {
    let provider = served.provider.clone();
    Arc::new(ServedVerifier { served, provider })
}

#[derive(Debug)]
struct ServedVerifier {
    served: Arc<ServedCertificate>,
    provider: Arc<CryptoProvider>,
}

impl rustls::client::danger::ServerCertVerifier for ServedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        match end_entity.as_ref() == self.served.leaf().as_ref() {
            true => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            false => Err(rustls::Error::General("not the certificate this server serves".into())),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

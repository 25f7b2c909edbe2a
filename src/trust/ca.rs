//! The agent CA (docs/trust.md): made on the first start that has a key-encryption key, its
//! certificate and key sealed together as the server's own secret, so every replica on the
//! database loads the same one (the first to start makes it; a replica that loses the race
//! loads the winner's). It signs agents' certificates from their signing requests, binding
//! each to its agent id whatever the request asked for.

use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use toolgate_domain::certs::{IssuedCert, agent_uri};

use crate::sealing::vault::{Vault, VaultError};

/// The first CA generation's name among the server's own secrets.
const CA_SECRET: &str = "agent-ca-1";

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error(transparent)]
    Vault(#[from] VaultError),
    #[error("the agent CA could not be made or read: {0}")]
    Ca(String),
    #[error("the certificate signing request is not usable: {0}")]
    BadRequest(String),
}

/// The CA as it is sealed: its certificate and its key, both PEM.
#[derive(Serialize, Deserialize)]
struct StoredCa {
    generation: u32,
    cert_pem: String,
    key_pem: String,
}

pub struct AgentCa {
    generation: u32,
    cert_pem: String,
    fingerprint: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A certificate just issued, and its record.
pub struct Issued {
    pub pem: String,
    pub record: IssuedCert,
}

fn ca_error(e: impl std::fmt::Display) -> TrustError {
    TrustError::Ca(e.to_string())
}

fn at(ms: i64) -> Result<time::OffsetDateTime, TrustError> {
    time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000)).map_err(ca_error)
}

impl AgentCa {
    /// The CA the database holds, made now if there is none; None on a server without a
    /// key-encryption key (nothing could seal the CA's key).
    pub async fn load_or_create(vault: &Vault, now_secs: i64) -> Result<Option<AgentCa>, TrustError> {
        let stored = match vault.reveal_internal(CA_SECRET).await {
            Err(VaultError::NoKek) => return Ok(None),
            found => found?,
        };
        if let Some(stored) = stored {
            return Self::from_stored(&stored).map(Some);
        }
        let made = Self::make(now_secs)?;
        if !vault.put_internal(CA_SECRET, &made, now_secs).await? {
            tracing::info!("another replica made the agent CA first: using it");
        }
        let stored = vault.reveal_internal(CA_SECRET).await?.ok_or_else(|| ca_error("it vanished as it was made"))?;
        Self::from_stored(&stored).map(Some)
    }

    /// A new self-signed CA, as sealed JSON.
    fn make(now_secs: i64) -> Result<String, TrustError> {
        let key = KeyPair::generate().map_err(ca_error)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(ca_error)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.distinguished_name.push(DnType::CommonName, "toolgate agent CA 1");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.not_before = at(now_secs * 1000 - 3_600_000)?;
        params.not_after = at((now_secs + 10 * 365 * 86_400) * 1000)?;
        let cert = params.self_signed(&key).map_err(ca_error)?;
        let stored = StoredCa { generation: 1, cert_pem: cert.pem(), key_pem: key.serialize_pem() };
        serde_json::to_string(&stored).map_err(ca_error)
    }

    fn from_stored(json: &str) -> Result<AgentCa, TrustError> {
        let stored: StoredCa = serde_json::from_str(json).map_err(ca_error)?;
        let key = KeyPair::from_pem(&stored.key_pem).map_err(ca_error)?;
        let issuer = Issuer::from_ca_cert_pem(&stored.cert_pem, key).map_err(ca_error)?;
        let der = rustls_pki_der(&stored.cert_pem)?;
        let fingerprint = Sha256::digest(&der).iter().map(|b| format!("{b:02x}")).collect();
        Ok(AgentCa { generation: stored.generation, cert_pem: stored.cert_pem, fingerprint, issuer })
    }

    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The SHA-256 of the CA certificate (DER), hex: what an operator compares.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// A client certificate for `agent_id` from its signing request (whose signature is
    /// checked: the agent holds the key), valid from now for `lifetime_secs`.
    pub fn issue(
        &self,
        agent_id: &str,
        csr_pem: &str,
        lifetime_secs: i64,
        now_ms: i64,
        reason: &str,
    ) -> Result<Issued, TrustError> {
        let mut request =
            CertificateSigningRequestParams::from_pem(csr_pem).map_err(|e| TrustError::BadRequest(e.to_string()))?;
        // The agent chooses its key, never what the certificate says.
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, agent_id);
        let uri =
            agent_uri(agent_id).try_into().map_err(|_| TrustError::BadRequest(format!("agent id `{agent_id}`")))?;
        params.subject_alt_names = vec![SanType::URI(uri)];
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.use_authority_key_identifier_extension = true;
        // A minute's grace for the agent's clock.
        let not_before_ms = now_ms - 60_000;
        let not_after_ms = now_ms + lifetime_secs * 1000;
        params.not_before = at(not_before_ms)?;
        params.not_after = at(not_after_ms)?;
        let mut serial = toolgate_domain::secrets::random_bytes::<16>();
        // Positive, as DER integers must be, and without a leading zero byte, which DER would
        // drop: the serial read back from the certificate is this one.
        serial[0] = (serial[0] & 0x7f).max(1);
        let serial_hex: String = serial.iter().map(|b| format!("{b:02x}")).collect();
        params.serial_number = Some(SerialNumber::from_slice(&serial));
        request.params = params;
        let cert = request.signed_by(&self.issuer).map_err(ca_error)?;
        let record = IssuedCert {
            serial_hex,
            agent_id: agent_id.to_string(),
            ca_generation: self.generation,
            not_before_ms,
            not_after_ms,
            issued_at_ms: now_ms,
            reason: reason.to_string(),
            revoked: None,
        };
        Ok(Issued { pem: cert.pem(), record })
    }
}

/// The DER of the first certificate in `pem`.
fn rustls_pki_der(pem: &str) -> Result<Vec<u8>, TrustError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes()).map(|d| d.to_vec()).map_err(ca_error)
}

#[cfg(test)]
#[path = "ca_tests.rs"]
mod tests;

//! The agent CA (docs/trust.md): made on the first start that has a key-encryption key, each
//! generation's certificate and key sealed together as the server's own secret, so every
//! replica on the database loads the same ones (the first to start makes the first; a replica
//! that loses the race loads the winner's). The newest generation signs agents' certificates
//! from their signing requests, binding each to its agent id whatever the request asked for;
//! a rotation makes the next, cross-signed by the one before, and every generation kept is
//! trusted until it is retired.

use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData, SanType, SerialNumber,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use toolgate_domain::certs::{IssuedCert, agent_uri};
use x509_parser::prelude::FromDer;

use crate::sealing::vault::{INTERNAL, Vault, VaultError};

/// Each CA generation's name among the server's own secrets: this, then its number.
const CA_SECRET_PREFIX: &str = "agent-ca-";

fn secret_name(generation: u32) -> String {
    format!("{CA_SECRET_PREFIX}{generation}")
}

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error(transparent)]
    Vault(#[from] VaultError),
    #[error("the agent CA could not be made or read: {0}")]
    Ca(String),
    #[error("the certificate signing request is not usable: {0}")]
    BadRequest(String),
    #[error("{0}")]
    Refused(String),
}

/// A CA generation as it is sealed: its certificate and key (PEM), and for every generation
/// after the first, its certificate cross-signed by the generation before it.
#[derive(Serialize, Deserialize)]
struct StoredCa {
    generation: u32,
    cert_pem: String,
    key_pem: String,
    #[serde(default)]
    cross_pem: Option<String>,
}

/// One generation the server trusts: its number, certificate and fingerprint.
#[derive(Clone, Debug)]
pub struct Generation {
    pub generation: u32,
    pub cert_pem: String,
    pub fingerprint: String,
}

/// The CA: the newest generation signs; every generation still kept is trusted.
pub struct AgentCa {
    current: Generation,
    /// The current certificate, then its cross-signed one (if any): what agents are given, so
    /// that one which pinned an older generation can follow the chain to it.
    chain_pem: String,
    issuer: Issuer<'static, KeyPair>,
    trusted: Vec<Generation>,
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

/// The generations the vault keeps, oldest first (decoded).
async fn stored(vault: &Vault) -> Result<Vec<StoredCa>, TrustError> {
    let mut generations: Vec<u32> = vault
        .list(Some(INTERNAL))
        .await?
        .iter()
        .filter_map(|meta| meta.key.strip_prefix(CA_SECRET_PREFIX)?.parse().ok())
        .collect();
    generations.sort_unstable();
    let mut found = Vec::new();
    for generation in generations {
        let Some(json) = vault.reveal_internal(&secret_name(generation)).await? else { continue };
        found.push(serde_json::from_str::<StoredCa>(&json).map_err(ca_error)?);
    }
    Ok(found)
}

/// The parameters of generation `generation`'s certificate, valid ten years from `now_secs`.
fn ca_params(generation: u32, now_secs: i64) -> Result<CertificateParams, TrustError> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(ca_error)?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.distinguished_name.push(DnType::CommonName, format!("toolgate agent CA {generation}"));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.use_authority_key_identifier_extension = generation > 1;
    params.not_before = at(now_secs * 1000 - 3_600_000)?;
    params.not_after = at((now_secs + 10 * 365 * 86_400) * 1000)?;
    Ok(params)
}

fn fingerprint_of(pem: &str) -> Result<String, TrustError> {
    Ok(toolgate_domain::secrets::hex(&Sha256::digest(rustls_pki_der(pem)?)))
}

impl AgentCa {
    /// The CA the database holds, never making one (the operator's commands): None when there
    /// is none yet.
    pub async fn load(vault: &Vault) -> Result<Option<AgentCa>, TrustError> {
        let generations = stored(vault).await?;
        match generations.is_empty() {
            true => Ok(None),
            false => Self::from_stored(generations).map(Some),
        }
    }

    /// [`AgentCa::load`], for the commands that need a CA: it says how to get one.
    async fn existing(vault: &Vault) -> Result<AgentCa, TrustError> {
        Self::load(vault).await?.ok_or_else(|| {
            TrustError::Refused(
                "this database has no agent CA yet: the first start with a key-encryption key makes one, or `toolgate ca import` brings your own".into(),
            )
        })
    }

    /// The CA the database holds, its first generation made now if there is none; None on a
    /// server without a key-encryption key (nothing could seal the CA's key).
    pub async fn load_or_create(vault: &Vault, now_secs: i64) -> Result<Option<AgentCa>, TrustError> {
        match vault.reveal_internal(&secret_name(1)).await {
            Err(VaultError::NoKek) => return Ok(None),
            found => found?,
        };
        if stored(vault).await?.is_empty() {
            let key = KeyPair::generate().map_err(ca_error)?;
            let cert = ca_params(1, now_secs)?.self_signed(&key).map_err(ca_error)?;
            let first = StoredCa { generation: 1, cert_pem: cert.pem(), key_pem: key.serialize_pem(), cross_pem: None };
            if !vault.put_internal(&secret_name(1), &serde_json::to_string(&first).map_err(ca_error)?, now_secs).await?
            {
                tracing::info!("another replica made the agent CA first: using it");
            }
        }
        Self::from_stored(stored(vault).await?).map(Some)
    }

    /// Makes the operator's CA (its certificate and key, PEM) the first generation, on a
    /// database that has none yet: instead of the one the first start would make. It must be a
    /// CA certificate, unexpired, for an ECDSA P-256 key (what agents check signatures with).
    pub async fn import(vault: &Vault, cert_pem: &str, key_pem: &str, now_secs: i64) -> Result<Generation, TrustError> {
        let refused = |why: String| TrustError::Refused(why);
        match vault.reveal_internal(&secret_name(1)).await {
            Err(VaultError::NoKek) => return Err(refused("no key-encryption key to seal the CA's key with".into())),
            found => found?,
        };
        if !stored(vault).await?.is_empty() {
            return Err(refused(
                "this database has an agent CA already: `toolgate ca rotate` makes the next generation".into(),
            ));
        }
        let key = KeyPair::from_pem(key_pem).map_err(|e| refused(format!("the key does not read: {e}")))?;
        if key.algorithm() != &rcgen::PKCS_ECDSA_P256_SHA256 {
            return Err(refused("the key must be ECDSA P-256: agents check signatures with nothing else".into()));
        }
        let der = rustls_pki_der(cert_pem).map_err(|e| refused(format!("the certificate does not read: {e}")))?;
        let (_, cert) = x509_parser::prelude::X509Certificate::from_der(&der)
            .map_err(|e| refused(format!("the certificate does not read: {e}")))?;
        if !cert.is_ca() {
            return Err(refused("the certificate is not a CA's (it needs basicConstraints CA:TRUE)".into()));
        }
        if cert.public_key().raw != key.subject_public_key_info().as_slice() {
            return Err(refused("the key does not fit the certificate".into()));
        }
        if cert.validity().not_after.timestamp() <= now_secs {
            return Err(refused("the certificate has expired".into()));
        }
        let certificates = <rustls::pki_types::CertificateDer as rustls::pki_types::pem::PemObject>::pem_slice_iter(
            cert_pem.as_bytes(),
        )
        .count();
        if certificates != 1 {
            return Err(refused(format!("give the CA's certificate alone ({certificates} certificates in the file)")));
        }
        let key_pem = key.serialize_pem();
        Issuer::from_ca_cert_pem(cert_pem, key).map_err(|e| refused(format!("rcgen cannot sign with it: {e}")))?;
        let first = StoredCa { generation: 1, cert_pem: cert_pem.to_string(), key_pem, cross_pem: None };
        if !vault.put_internal(&secret_name(1), &serde_json::to_string(&first).map_err(ca_error)?, now_secs).await? {
            return Err(refused("a server made its own CA at the same moment: import before the first start".into()));
        }
        Ok(Generation { generation: 1, fingerprint: fingerprint_of(&first.cert_pem)?, cert_pem: first.cert_pem })
    }

    /// Makes the next generation, cross-signed by the current one, and keeps it; the servers
    /// sign with it from their next start, trusting every generation still kept.
    pub async fn rotate(vault: &Vault, now_secs: i64) -> Result<Generation, TrustError> {
        let current = Self::existing(vault).await?;
        let generation = current.current.generation + 1;
        let key = KeyPair::generate().map_err(ca_error)?;
        let params = ca_params(generation, now_secs)?;
        let cert = params.self_signed(&key).map_err(ca_error)?;
        let cross = params.signed_by(&key, &current.issuer).map_err(ca_error)?;
        let next =
            StoredCa { generation, cert_pem: cert.pem(), key_pem: key.serialize_pem(), cross_pem: Some(cross.pem()) };
        if !vault
            .put_internal(&secret_name(generation), &serde_json::to_string(&next).map_err(ca_error)?, now_secs)
            .await?
        {
            return Err(TrustError::Refused(format!("generation {generation} was made by another rotation just now")));
        }
        Ok(Generation { generation, fingerprint: fingerprint_of(&next.cert_pem)?, cert_pem: next.cert_pem })
    }

    /// Stops trusting generation `generation` (its key is deleted); never the current one.
    pub async fn retire(vault: &Vault, generation: u32) -> Result<(), TrustError> {
        let ca = Self::existing(vault).await?;
        if generation == ca.current.generation {
            return Err(TrustError::Refused(format!(
                "generation {generation} is the one that signs: rotate first (toolgate ca rotate)"
            )));
        }
        match vault.delete(INTERNAL, &secret_name(generation)).await? {
            Some(_) => Ok(()),
            None => {
                Err(TrustError::Refused(format!("no generation {generation} is kept (toolgate ca status lists them)")))
            }
        }
    }

    fn from_stored(generations: Vec<StoredCa>) -> Result<AgentCa, TrustError> {
        let newest = generations.last().ok_or_else(|| ca_error("it vanished as it was made"))?;
        let key = KeyPair::from_pem(&newest.key_pem).map_err(ca_error)?;
        let issuer = Issuer::from_ca_cert_pem(&newest.cert_pem, key).map_err(ca_error)?;
        let chain_pem = format!("{}{}", newest.cert_pem, newest.cross_pem.as_deref().unwrap_or_default());
        let trusted = generations
            .iter()
            .rev()
            .map(|g| {
                Ok(Generation {
                    generation: g.generation,
                    cert_pem: g.cert_pem.clone(),
                    fingerprint: fingerprint_of(&g.cert_pem)?,
                })
            })
            .collect::<Result<Vec<_>, TrustError>>()?;
        Ok(AgentCa { current: trusted[0].clone(), chain_pem, issuer, trusted })
    }

    /// The current generation's certificate.
    pub fn cert_pem(&self) -> &str {
        &self.current.cert_pem
    }

    /// The current certificate and its cross-signed one: what an agent is given.
    pub fn chain_pem(&self) -> &str {
        &self.chain_pem
    }

    /// Every generation trusted, newest first.
    pub fn trusted(&self) -> &[Generation] {
        &self.trusted
    }

    /// The SHA-256 of the current CA certificate (DER), hex: what an operator compares.
    pub fn fingerprint(&self) -> &str {
        &self.current.fingerprint
    }

    /// The current generation's number.
    pub fn generation(&self) -> u32 {
        self.current.generation
    }

    /// A code-signing certificate (PEM) for `key`, named `name`, valid from now for a year, and
    /// when it expires.
    pub fn issue_code_signing(&self, key: &KeyPair, name: &str, now_ms: i64) -> Result<(String, i64), TrustError> {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
        params.use_authority_key_identifier_extension = true;
        let not_after_ms = now_ms + 365 * 86_400_000;
        params.not_before = at(now_ms - 60_000)?;
        params.not_after = at(not_after_ms)?;
        Ok((params.signed_by(key, &self.issuer).map_err(ca_error)?.pem(), not_after_ms))
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
        let serial_hex = toolgate_domain::secrets::hex(&serial);
        params.serial_number = Some(SerialNumber::from_slice(&serial));
        request.params = params;
        let cert = request.signed_by(&self.issuer).map_err(ca_error)?;
        let record = IssuedCert {
            serial_hex,
            agent_id: agent_id.to_string(),
            ca_generation: self.current.generation,
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

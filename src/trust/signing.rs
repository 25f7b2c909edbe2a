//! The code-signing key (docs/trust.md): it signs every frame that makes an agent act
//! ([`toolgate_domain::fleet::signing`]). Made with the CA on the first start, and again whenever
//! the CA signing agents' certificates is a newer generation than the one that certified it (an
//! agent enrolled after a rotation pinned only the newer one); `issue_code_signing_cert` makes
//! the next on demand. Sealed like the CA, as `code-signing-N`; the newest is used.

use std::sync::Arc;

use rcgen::{KeyPair, SigningKey};
use rustls::pki_types::pem::PemObject;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use toolgate_domain::fleet::signing::SignedFrame;
use toolgate_fleet::FrameSigning;

use super::ca::{AgentCa, TrustError};
use crate::sealing::vault::{INTERNAL, Vault};

const SIGNER_SECRET_PREFIX: &str = "code-signing-";

#[derive(Serialize, Deserialize)]
struct StoredSigner {
    generation: u32,
    /// The CA generation that certified it.
    ca_generation: u32,
    cert_pem: String,
    key_pem: String,
    /// When its certificate expires (ms since the epoch).
    not_after_ms: i64,
}

/// A server starting with less than this left on its code-signing certificate makes the next.
const RENEW_SIGNER_WITHIN_MS: i64 = 30 * 86_400_000;

/// The key frames are signed with, and the chain an agent checks it by.
pub struct FrameSigner {
    generation: u32,
    ca_generation: u32,
    key: KeyPair,
    chain_pem: String,
    fingerprint: String,
}

/// What `issue_code_signing_cert` and the start say of a signer.
#[derive(Clone, Debug, Serialize)]
pub struct SignerInfo {
    pub generation: u32,
    pub ca_generation: u32,
    pub fingerprint: String,
}

fn signer_error(e: impl std::fmt::Display) -> TrustError {
    TrustError::Ca(format!("the code-signing key: {e}"))
}

/// The newest signer the vault keeps, if any.
async fn newest(vault: &Vault) -> Result<Option<StoredSigner>, TrustError> {
    let newest = vault
        .list(Some(INTERNAL))
        .await?
        .iter()
        .filter_map(|meta| meta.key.strip_prefix(SIGNER_SECRET_PREFIX)?.parse::<u32>().ok())
        .max();
    let Some(generation) = newest else { return Ok(None) };
    let Some(json) = vault.reveal_internal(&format!("{SIGNER_SECRET_PREFIX}{generation}")).await? else {
        return Ok(None);
    };
    serde_json::from_str(&json).map(Some).map_err(signer_error)
}

impl FrameSigner {
    /// The newest code-signing key, made now when there is none, the CA has rotated since, or
    /// its certificate has less than 30 days left.
    pub async fn load_or_create(vault: &Vault, ca: &AgentCa, now_ms: i64) -> Result<FrameSigner, TrustError> {
        match newest(vault).await? {
            Some(stored)
                if stored.ca_generation == ca.generation() && stored.not_after_ms - now_ms > RENEW_SIGNER_WITHIN_MS =>
            {
                Self::from_stored(stored, ca)
            }
            _ => Self::issue_next(vault, ca, now_ms).await.map(|(signer, _)| signer),
        }
    }

    /// Makes the next code-signing key, certified by the current CA generation.
    pub async fn issue_next(vault: &Vault, ca: &AgentCa, now_ms: i64) -> Result<(FrameSigner, SignerInfo), TrustError> {
        let generation = newest(vault).await?.map_or(1, |s| s.generation + 1);
        let key = KeyPair::generate().map_err(signer_error)?;
        let (cert_pem, not_after_ms) =
            ca.issue_code_signing(&key, &format!("toolgate code signing {generation}"), now_ms)?;
        let key_pem = key.serialize_pem();
        let stored = StoredSigner { generation, ca_generation: ca.generation(), cert_pem, key_pem, not_after_ms };
        let json = serde_json::to_string(&stored).map_err(signer_error)?;
        let stored =
            match vault.put_internal(&format!("{SIGNER_SECRET_PREFIX}{generation}"), &json, now_ms / 1000).await? {
                true => stored,
                // Another replica made this generation at the same moment: use the newest.
                false => newest(vault).await?.ok_or_else(|| signer_error("it vanished as it was made"))?,
            };
        let signer = Self::from_stored(stored, ca)?;
        let info = signer.info();
        Ok((signer, info))
    }

    fn from_stored(stored: StoredSigner, ca: &AgentCa) -> Result<FrameSigner, TrustError> {
        let key = KeyPair::from_pem(&stored.key_pem).map_err(signer_error)?;
        let der =
            rustls::pki_types::CertificateDer::from_pem_slice(stored.cert_pem.as_bytes()).map_err(signer_error)?;
        let fingerprint = toolgate_domain::secrets::hex(&Sha256::digest(&der));
        let chain_pem = format!("{}{}", stored.cert_pem, ca.chain_pem());
        Ok(FrameSigner {
            generation: stored.generation,
            ca_generation: stored.ca_generation,
            key,
            chain_pem,
            fingerprint,
        })
    }

    pub fn info(&self) -> SignerInfo {
        SignerInfo {
            generation: self.generation,
            ca_generation: self.ca_generation,
            fingerprint: self.fingerprint.clone(),
        }
    }

    /// `payload` (an inner frame's JSON) signed for `agent_id` until `deadline_ms`.
    pub fn sign(
        &self,
        payload: String,
        agent_id: &str,
        execution_id: Option<&str>,
        deadline_ms: i64,
    ) -> Result<SignedFrame, TrustError> {
        let bytes = SignedFrame::signed_bytes(agent_id, execution_id, deadline_ms, &payload);
        let signature = self.key.sign(&bytes).map_err(signer_error)?;
        Ok(SignedFrame {
            payload,
            agent_id: agent_id.to_string(),
            execution_id: execution_id.map(String::from),
            deadline_ms,
            chain_pem: self.chain_pem.clone(),
            signature_hex: toolgate_domain::secrets::hex(&signature),
        })
    }
}

/// The signer in use, replaced at once when `issue_code_signing_cert` makes the next: agents
/// take any signer the pinned CA certified, so replicas need not switch together.
pub struct CurrentSigner(std::sync::RwLock<Arc<FrameSigner>>);

impl CurrentSigner {
    pub fn new(signer: FrameSigner) -> Self {
        Self(std::sync::RwLock::new(Arc::new(signer)))
    }

    pub fn get(&self) -> Arc<FrameSigner> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn replace(&self, signer: FrameSigner) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(signer);
    }
}

impl FrameSigning for CurrentSigner {
    fn sign(
        &self,
        payload: String,
        agent_id: &str,
        execution_id: Option<&str>,
        deadline_ms: i64,
    ) -> Result<SignedFrame, String> {
        self.get().sign(payload, agent_id, execution_id, deadline_ms).map_err(|e| e.to_string())
    }
}

/// What the trust tools reach: the CA and the signer, with the vault they are sealed in.
pub struct Trust {
    pub ca: Arc<AgentCa>,
    pub signer: Arc<CurrentSigner>,
}

#[cfg(test)]
#[path = "signing_tests.rs"]
mod tests;

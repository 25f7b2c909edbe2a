//! What agents trust and how they are known (docs/trust.md): the agent CA, sealed under the
//! key-encryption key and shared by replicas, the certificates it issues from requests the
//! agents make with keys of their own, and the code-signing key that signs what they are told.

use std::sync::Arc;

use crate::sealing::vault::Vault;

pub mod ca;
pub mod issuer;
pub mod mutual_tls;
pub mod signing;

/// The CA and the code-signing key, made on the first start that has a key-encryption key and
/// loaded on every later one; None without one (said at start).
pub async fn start(vault: &Vault, now_ms: i64) -> Result<Option<signing::Trust>, ca::TrustError> {
    let Some(ca) = ca::AgentCa::load_or_create(vault, now_ms / 1000).await? else {
        println!("toolgate: no agent CA without a key-encryption key: agents get no certificates, frames go unsigned");
        return Ok(None);
    };
    let trusted = ca.trusted();
    println!(
        "toolgate: agent CA {} (generation {} of {} trusted) signs agents' certificates",
        ca.fingerprint(),
        trusted[0].generation,
        trusted.len()
    );
    let signer = signing::FrameSigner::load_or_create(vault, &ca, now_ms).await?;
    let info = signer.info();
    println!(
        "toolgate: code-signing key {} (generation {}) signs what agents are told to do",
        info.fingerprint, info.generation
    );
    Ok(Some(signing::Trust { ca: Arc::new(ca), signer: Arc::new(signing::CurrentSigner::new(signer)) }))
}

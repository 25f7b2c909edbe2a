//! Frames the agent acts on are signed (docs/trust.md): once it has pinned the agent CA (at its
//! first certificate), a run, a quarantine or release and compliance rules must come inside a
//! [`SignedFrame`] for this agent, unexpired, whose code-signing certificate chains to the pinned
//! CA and whose signature covers the frame. Anything else is refused before the worker sees it,
//! and the refusal is reported.

use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use toolgate_domain::fleet::signing::{FrameRefusal, SignedFrame};
use toolgate_domain::fleet::wire::{AgentMessage, ServerMessage};

use crate::state::write_durably;

/// Where the pinned CA is kept: written at the first certificate, replaced only by a CA
/// generation the pinned one vouched for ([`pin`]).
pub const PINNED_FILE: &str = "pinned-ca.pem";

/// The code-signing purpose (1.3.6.1.5.5.7.3.3), as its DER contents.
const CODE_SIGNING: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x03];

/// The CA the agent pinned at enrollment (DER).
#[derive(Clone, Debug)]
pub struct Pinned(CertificateDer<'static>);

/// The pinned CA in `state_dir`, if any (one that cannot be read is an error: refusing every
/// frame is safer than taking unsigned ones).
pub fn load(state_dir: &Path) -> Result<Option<Pinned>, String> {
    let path = state_dir.join(PINNED_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let der = CertificateDer::from_pem_slice(text.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Some(Pinned(der.into_owned())))
}

/// The CA a session checks frames by: the pinned one; an agent holding a certificate from
/// before pinning existed pins that certificate's CA now.
pub fn pinned_for_session(state_dir: &Path) -> Result<Option<Pinned>, String> {
    if let Some(held) = crate::certificate::load(state_dir)
        && let Err(e) = pin_once(state_dir, &held.ca_pem)
    {
        tracing::warn!("cannot pin the agent CA: {e}");
    }
    load(state_dir)
}

/// The first certificate's PEM block of `ca_pem` (the CA that signed the certificate it came
/// with), as the server wrote it, checked to read.
fn first_block(ca_pem: &str) -> Result<(String, CertificateDer<'static>), String> {
    const END: &str = "-----END CERTIFICATE-----";
    let at = ca_pem.find(END).ok_or("the CA chain holds no certificate")?;
    let pem = format!("{}\n", ca_pem[..at + END.len()].trim_start());
    let der =
        CertificateDer::from_pem_slice(pem.as_bytes()).map_err(|e| format!("the CA certificate does not read: {e}"))?;
    Ok((pem, der.into_owned()))
}

/// Pins the first certificate of `ca_pem` (the CA that signed the agent's first certificate),
/// unless a CA is pinned already.
pub fn pin_once(state_dir: &Path, ca_pem: &str) -> Result<(), String> {
    if state_dir.join(PINNED_FILE).exists() {
        return Ok(());
    }
    let (pem, _) = first_block(ca_pem)?;
    write_durably(state_dir, PINNED_FILE, pem.as_bytes()).map_err(|e| e.to_string())
}

/// Pins the CA of a certificate just received (`cert_pem`, with `ca_pem` above it): the first
/// pins its CA; a later one from a newer CA generation moves the pin there only when the pinned
/// CA vouches for it (the certificate chains to the pinned CA through the cross-signed
/// certificate that came with it). So a rotation is followed, one generation at a time, and a
/// CA the pinned one never vouched for is not.
pub fn pin(state_dir: &Path, cert_pem: &str, ca_pem: &str, now_ms: i64) -> Result<(), String> {
    let Some(pinned) = load(state_dir)? else { return pin_once(state_dir, ca_pem) };
    let (pem, newest) = first_block(ca_pem)?;
    if newest.as_ref() == pinned.0.as_ref() {
        return Ok(());
    }
    let leaf = CertificateDer::from_pem_slice(cert_pem.as_bytes()).map_err(|e| e.to_string())?;
    let chain =
        CertificateDer::pem_slice_iter(ca_pem.as_bytes()).collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
    let anchor = webpki::anchor_from_trusted_cert(&pinned.0).map_err(|e| format!("the pinned CA: {e}"))?;
    let now = UnixTime::since_unix_epoch(std::time::Duration::from_millis(now_ms.max(0) as u64));
    webpki::EndEntityCert::try_from(&leaf)
        .and_then(|ee| {
            let algorithms = [webpki::ring::ECDSA_P256_SHA256];
            ee.verify_for_usage(&algorithms, &[anchor], &chain, now, webpki::KeyUsage::client_auth(), None, None)
                .map(drop)
        })
        .map_err(|e| format!("the new CA is not vouched for by the pinned one, which stays: {e}"))?;
    write_durably(state_dir, PINNED_FILE, pem.as_bytes()).map_err(|e| e.to_string())?;
    tracing::info!("the pinned agent CA moved to the generation the pinned one cross-signed");
    Ok(())
}

fn hex_bytes(hex: &str) -> Option<Vec<u8>> {
    hex.len()
        .is_multiple_of(2)
        .then(|| (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()).collect())
        .flatten()
}

impl Pinned {
    /// The frame inside `signed`, if it is for `agent_id`, unexpired at `now_ms`, signed by a
    /// code-signing certificate that chains to this CA, and an acting frame of the execution
    /// signed. Otherwise why not, and a detail for the report.
    pub fn open(
        &self,
        signed: &SignedFrame,
        agent_id: &str,
        now_ms: i64,
    ) -> Result<ServerMessage, (FrameRefusal, String)> {
        if signed.agent_id != agent_id {
            return Err((FrameRefusal::OtherAgent, format!("signed for agent {}", signed.agent_id)));
        }
        if now_ms > signed.deadline_ms {
            return Err((FrameRefusal::Expired, format!("its deadline passed {} ms ago", now_ms - signed.deadline_ms)));
        }
        let bad = |why: String| (FrameRefusal::BadSignature, why);
        let chain = CertificateDer::pem_slice_iter(signed.chain_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(format!("the chain does not read: {e}")))?;
        let (leaf, intermediates) = chain.split_first().ok_or_else(|| bad("no code-signing certificate".into()))?;
        let anchor = webpki::anchor_from_trusted_cert(&self.0).map_err(|e| bad(format!("the pinned CA: {e}")))?;
        let signer = webpki::EndEntityCert::try_from(leaf).map_err(|e| bad(format!("the signing certificate: {e}")))?;
        let now = UnixTime::since_unix_epoch(std::time::Duration::from_millis(now_ms.max(0) as u64));
        let algorithms = [webpki::ring::ECDSA_P256_SHA256];
        // Checked on every certificate of the path: the CA certificates carry no purposes, and
        // every certificate this CA issues names its own (client auth for agents, code signing
        // for signers), so a certificate of it not made for code signing is refused.
        let code_signing = webpki::KeyUsage::required_if_present(CODE_SIGNING);
        signer
            .verify_for_usage(&algorithms, &[anchor], intermediates, now, code_signing, None, None)
            .map_err(|e| bad(format!("the signing certificate does not chain to the pinned CA: {e}")))?;
        let signature = hex_bytes(&signed.signature_hex).ok_or_else(|| bad("the signature is not hex".into()))?;
        signer
            .verify_signature(webpki::ring::ECDSA_P256_SHA256, &signed.own_signed_bytes(), &signature)
            .map_err(|e| bad(format!("the signature does not verify: {e}")))?;
        let inner: ServerMessage = serde_json::from_str(&signed.payload)
            .map_err(|e| (FrameRefusal::Malformed, format!("the signed frame does not read: {e}")))?;
        if !inner.acts() || inner.execution_id() != signed.execution_id.as_deref() {
            return Err((FrameRefusal::Malformed, "the signed frame is not the acting frame it was signed as".into()));
        }
        Ok(inner)
    }
}

#[cfg(test)]
#[path = "signed_tests.rs"]
mod tests;

/// What the worker may see of `message`: an acting frame only signed (once a CA is pinned),
/// opened; anything else as it came. A refusal is the report to send back instead.
pub fn admit(
    message: ServerMessage,
    pinned: Option<&Pinned>,
    agent_id: &str,
    now_ms: i64,
) -> Result<ServerMessage, AgentMessage> {
    let refused = |execution_id: Option<&str>, (reason, detail): (FrameRefusal, String)| AgentMessage::FrameRefused {
        execution_id: execution_id.map(String::from),
        reason,
        detail,
    };
    match (message, pinned) {
        (ServerMessage::Signed(signed), Some(pinned)) => {
            pinned.open(&signed, agent_id, now_ms).map_err(|why| refused(signed.execution_id.as_deref(), why))
        }
        (ServerMessage::Signed(signed), None) => Err(refused(
            signed.execution_id.as_deref(),
            (FrameRefusal::BadSignature, "this agent has pinned no CA to check signatures by".into()),
        )),
        (message, Some(_)) if message.acts() => Err(refused(
            message.execution_id(),
            (FrameRefusal::Unsigned, "a frame that makes the agent act must be signed".into()),
        )),
        (message, _) => Ok(message),
    }
}

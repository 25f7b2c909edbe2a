//! Signed frames checked against a pinned CA made here: a good one opens; altered, expired,
//! for another agent, signed by a key the CA never certified, or by a certificate not meant for
//! code signing, each is refused with its reason; an unsigned acting frame is refused once a
//! CA is pinned and taken before.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, SigningKey,
};
use toolgate_domain::fleet::signing::SignedFrame;
use toolgate_domain::fleet::wire::ServerMessage;

use super::*;

const NOW_MS: i64 = 1_800_000_000_000;

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

/// A signing key and its certificate from `issuer`, for `purpose`.
fn signer(issuer: &CertifiedIssuer<'static, KeyPair>, purpose: ExtendedKeyUsagePurpose) -> (KeyPair, String) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::default();
    params.extended_key_usages = vec![purpose];
    let cert = params.signed_by(&key, issuer).unwrap();
    (key, cert.pem())
}

fn quarantine() -> ServerMessage {
    ServerMessage::Quarantine { quarantined: true, reason: Some("test".into()) }
}

fn sign(key: &KeyPair, chain_pem: &str, agent_id: &str, deadline_ms: i64, inner: &ServerMessage) -> SignedFrame {
    let payload = serde_json::to_string(inner).unwrap();
    let bytes = SignedFrame::signed_bytes(agent_id, None, deadline_ms, &payload);
    let signature_hex = toolgate_domain::secrets::hex(&key.sign(&bytes).unwrap());
    SignedFrame {
        payload,
        agent_id: agent_id.into(),
        execution_id: None,
        deadline_ms,
        chain_pem: chain_pem.into(),
        signature_hex,
    }
}

fn pinned(issuer: &CertifiedIssuer<'static, KeyPair>) -> Pinned {
    let dir = tempfile::tempdir().unwrap();
    pin_once(dir.path(), &issuer.pem()).unwrap();
    // Pinned once: a later CA does not replace it.
    pin_once(dir.path(), &ca("later").pem()).unwrap();
    let pinned = load(dir.path()).unwrap().unwrap();
    assert_eq!(pinned.0.as_ref(), issuer.der().as_ref(), "the first CA stays pinned");
    pinned
}

fn reason(result: Result<ServerMessage, (FrameRefusal, String)>) -> FrameRefusal {
    result.expect_err("refused").0
}

#[test]
fn only_a_frame_signed_for_this_agent_by_the_pinned_ca_opens() {
    let authority = ca("toolgate agent CA 1");
    let pinned = pinned(&authority);
    let (code_key, code_cert) = signer(&authority, ExtendedKeyUsagePurpose::CodeSigning);
    let deadline = NOW_MS + 60_000;
    let good = sign(&code_key, &code_cert, "agt-1", deadline, &quarantine());
    assert_eq!(pinned.open(&good, "agt-1", NOW_MS).unwrap(), quarantine());

    let altered = SignedFrame { payload: good.payload.replace("true", "false"), ..good.clone() };
    assert_eq!(reason(pinned.open(&altered, "agt-1", NOW_MS)), FrameRefusal::BadSignature);
    assert_eq!(reason(pinned.open(&good, "agt-2", NOW_MS)), FrameRefusal::OtherAgent);
    assert_eq!(reason(pinned.open(&good, "agt-1", deadline + 1)), FrameRefusal::Expired);
    let moved = SignedFrame { deadline_ms: deadline + 3_600_000, ..good.clone() };
    assert_eq!(reason(pinned.open(&moved, "agt-1", NOW_MS)), FrameRefusal::BadSignature, "the deadline is signed");

    let stranger = ca("someone else");
    let (key, cert) = signer(&stranger, ExtendedKeyUsagePurpose::CodeSigning);
    let foreign = sign(&key, &cert, "agt-1", deadline, &quarantine());
    assert_eq!(reason(pinned.open(&foreign, "agt-1", NOW_MS)), FrameRefusal::BadSignature);
    let (key, cert) = signer(&authority, ExtendedKeyUsagePurpose::ClientAuth);
    let not_for_code = sign(&key, &cert, "agt-1", deadline, &quarantine());
    assert_eq!(reason(pinned.open(&not_for_code, "agt-1", NOW_MS)), FrameRefusal::BadSignature);
    // Signed properly, but not an acting frame: nothing a signature could make it act on.
    let not_acting = sign(&code_key, &code_cert, "agt-1", deadline, &ServerMessage::Revoked { message: "x".into() });
    assert_eq!(reason(pinned.open(&not_acting, "agt-1", NOW_MS)), FrameRefusal::Malformed);
}

#[test]
fn an_unsigned_acting_frame_is_refused_once_a_ca_is_pinned() {
    let pinned = pinned(&ca("toolgate agent CA 1"));
    let refused = admit(quarantine(), Some(&pinned), "agt-1", NOW_MS);
    assert!(matches!(refused, Err(AgentMessage::FrameRefused { reason: FrameRefusal::Unsigned, .. })), "{refused:?}");
    assert_eq!(admit(quarantine(), None, "agt-1", NOW_MS).unwrap(), quarantine(), "a server without a CA");
    let welcome_like = ServerMessage::Revoked { message: "x".into() };
    assert_eq!(admit(welcome_like.clone(), Some(&pinned), "agt-1", NOW_MS).unwrap(), welcome_like);
}

/// A client certificate for a fresh key from `issuer` (what an agent is given), PEM.
fn client_certificate(issuer: &CertifiedIssuer<'static, KeyPair>) -> String {
    let mut params = CertificateParams::default();
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.signed_by(&KeyPair::generate().unwrap(), issuer).unwrap().pem()
}

#[test]
fn the_pin_follows_a_generation_the_pinned_ca_cross_signed_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let first = ca("toolgate agent CA 1");
    pin(dir.path(), &client_certificate(&first), &first.pem(), NOW_MS).unwrap();
    // Generation 2, and its certificate cross-signed by generation 1.
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.distinguished_name.push(DnType::CommonName, "toolgate agent CA 2");
    let cross = params.signed_by(&key, &first).unwrap().pem();
    let second = CertifiedIssuer::self_signed(params, key).unwrap();
    // A CA nobody vouched for is not followed.
    let stranger = ca("toolgate agent CA 2");
    let unvouched = format!("{}{cross}", stranger.pem());
    assert!(pin(dir.path(), &client_certificate(&stranger), &unvouched, NOW_MS).is_err());
    assert_eq!(load(dir.path()).unwrap().unwrap().0.as_ref(), first.der().as_ref(), "kept");
    let chain = format!("{}{cross}", second.pem());
    pin(dir.path(), &client_certificate(&second), &chain, NOW_MS).unwrap();
    assert_eq!(load(dir.path()).unwrap().unwrap().0.as_ref(), second.der().as_ref(), "moved to generation 2");
}

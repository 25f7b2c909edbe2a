//! The agent CA with a real vault on a real (in-memory) store: made once and shared, sealed,
//! and its certificates accepted by rustls's client verifier (what the agent listener uses).

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use toolgate_store::SqliteStore;

use super::*;
use crate::sealing::vault::KeySource;

const NOW_MS: i64 = 1_800_000_000_000;

/// A minute after [`NOW_MS`].
fn during() -> UnixTime {
    UnixTime::since_unix_epoch(std::time::Duration::from_millis((NOW_MS + 60_000) as u64))
}

/// rustls's client verifier trusting `roots` (PEM): what the agent listener uses.
fn verifier_of(roots: &[&str]) -> Arc<dyn rustls::server::danger::ClientCertVerifier> {
    let mut store = rustls::RootCertStore::empty();
    for pem in roots {
        store.add(CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    WebPkiClientVerifier::builder_with_provider(Arc::new(store), provider).build().unwrap()
}

async fn vault(store: &toolgate_store::Repositories, kek: &str) -> Vault {
    Vault::open(KeySource::Variable(kek.to_string()), store.secrets.clone(), NOW_MS / 1000).await.unwrap()
}

fn request() -> String {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::default();
    // Whatever the agent asks for is not what it gets.
    params.distinguished_name.push(DnType::CommonName, "i am the CA now");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.serialize_request(&key).unwrap().pem().unwrap()
}

#[tokio::test]
async fn the_ca_is_made_once_sealed_and_shared_by_every_vault_on_the_store() {
    let store = SqliteStore::open_in_memory().unwrap().repositories();
    let absent = Vault::absent(store.secrets.clone());
    assert!(AgentCa::load_or_create(&absent, NOW_MS / 1000).await.unwrap().is_none(), "no KEK, no CA");
    let kek = crate::sealing::keyring::generate(1);
    let first = AgentCa::load_or_create(&vault(&store, &kek).await, NOW_MS / 1000).await.unwrap().unwrap();
    let replica = AgentCa::load_or_create(&vault(&store, &kek).await, NOW_MS / 1000).await.unwrap().unwrap();
    assert_eq!(first.fingerprint(), replica.fingerprint(), "a second server loads the first's CA");
    let row = store.secrets.secret(crate::sealing::vault::INTERNAL, &secret_name(1)).await.unwrap().unwrap();
    assert!(!String::from_utf8_lossy(&row.ciphertext).contains("PRIVATE KEY"), "the key is sealed");
    let other = crate::sealing::keyring::generate(1);
    let wrong = Vault::open(KeySource::Variable(other), store.secrets.clone(), NOW_MS / 1000).await;
    assert!(wrong.is_err(), "another key file cannot open it (the vault refuses to start)");
}

#[tokio::test]
async fn an_agents_certificate_names_its_agent_and_chains_to_the_ca() {
    let store = SqliteStore::open_in_memory().unwrap().repositories();
    let vault = vault(&store, &crate::sealing::keyring::generate(1)).await;
    let ca = AgentCa::load_or_create(&vault, NOW_MS / 1000).await.unwrap().unwrap();
    let issued = ca.issue("agt-0123", &request(), 3600, NOW_MS, "enrollment").unwrap();
    assert_eq!((issued.record.agent_id.as_str(), issued.record.not_after_ms), ("agt-0123", NOW_MS + 3_600_000));
    assert_eq!(issued.record.serial_hex.len(), 32);
    let leaf = CertificateDer::from_pem_slice(issued.pem.as_bytes()).unwrap();
    let der = leaf.to_vec();
    let uri = b"urn:toolgate:agent:agt-0123";
    assert!(der.windows(uri.len()).any(|w| w == uri), "the agent id is in its certificate");
    assert!(!der.windows(15).any(|w| w == b"i am the CA now"), "the request's own subject is not");

    let verifier = verifier_of(&[ca.cert_pem()]);
    verifier.verify_client_cert(&leaf, &[], during()).expect("rustls accepts it as a client certificate");
    let after = UnixTime::since_unix_epoch(std::time::Duration::from_millis((NOW_MS + 3_700_000) as u64));
    assert!(verifier.verify_client_cert(&leaf, &[], after).is_err(), "not once it expired");

    assert!(matches!(ca.issue("agt-0123", "not a request", 60, NOW_MS, "x"), Err(TrustError::BadRequest(_))));
}

#[tokio::test]
async fn a_rotation_signs_with_the_next_generation_cross_signed_by_the_last() {
    let store = SqliteStore::open_in_memory().unwrap().repositories();
    let vault = vault(&store, &crate::sealing::keyring::generate(1)).await;
    assert!(AgentCa::load(&vault).await.unwrap().is_none(), "loading never makes one");
    assert!(matches!(AgentCa::rotate(&vault, NOW_MS / 1000).await, Err(TrustError::Refused(_))), "none to rotate");
    let first = AgentCa::load_or_create(&vault, NOW_MS / 1000).await.unwrap().unwrap();
    let made = AgentCa::rotate(&vault, NOW_MS / 1000).await.unwrap();
    assert_eq!(made.generation, 2);
    let ca = AgentCa::load_or_create(&vault, NOW_MS / 1000).await.unwrap().unwrap();
    let generations: Vec<u32> = ca.trusted().iter().map(|g| g.generation).collect();
    assert_eq!((generations, ca.fingerprint()), (vec![2, 1], made.fingerprint.as_str()), "both trusted, the new signs");
    let issued = ca.issue("agt-0123", &request(), 3600, NOW_MS, "renewal").unwrap();
    assert_eq!(issued.record.ca_generation, 2);
    let leaf = CertificateDer::from_pem_slice(issued.pem.as_bytes()).unwrap();
    // Trusted by the new generation alone, and by the old one through the cross-signed
    // certificate the agent is given with its own (what an agent that pinned the old one has).
    verifier_of(&[ca.cert_pem()]).verify_client_cert(&leaf, &[], during()).expect("by the new CA");
    let chain: Vec<CertificateDer> =
        CertificateDer::pem_slice_iter(ca.chain_pem().as_bytes()).map(Result::unwrap).collect();
    assert_eq!(chain.len(), 2, "the new certificate and its cross-signed one");
    let old_only = verifier_of(&[first.cert_pem()]);
    assert!(old_only.verify_client_cert(&leaf, &[], during()).is_err(), "not without the cross-signed one");
    old_only.verify_client_cert(&leaf, &chain[1..], during()).expect("through the cross-signed certificate");

    // The signing generation cannot be retired; the old one can, and is then not trusted.
    assert!(matches!(AgentCa::retire(&vault, 2).await, Err(TrustError::Refused(_))));
    AgentCa::retire(&vault, 1).await.unwrap();
    let retired = AgentCa::load_or_create(&vault, NOW_MS / 1000).await.unwrap().unwrap();
    assert_eq!(retired.trusted().iter().map(|g| g.generation).collect::<Vec<_>>(), vec![2]);
    assert!(matches!(AgentCa::retire(&vault, 1).await, Err(TrustError::Refused(_))), "gone already");
    assert_eq!(AgentCa::rotate(&vault, NOW_MS / 1000).await.unwrap().generation, 3);
}

/// A self-signed CA certificate for `key` (`is_ca` false: a plain certificate).
fn operator_ca(key: &KeyPair, is_ca: bool) -> String {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, "Example Corp agent CA");
    if is_ca {
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    }
    params.self_signed(key).unwrap().pem()
}

#[tokio::test]
async fn an_operators_ca_is_imported_as_the_first_generation_and_only_then() {
    let store = SqliteStore::open_in_memory().unwrap().repositories();
    let vault = vault(&store, &crate::sealing::keyring::generate(1)).await;
    let key = KeyPair::generate().unwrap();
    let refused = |result: Result<Generation, TrustError>| match result {
        Err(TrustError::Refused(why)) => why,
        other => panic!("not refused: {:?}", other.map(|g| g.generation)),
    };
    let plain = refused(AgentCa::import(&vault, &operator_ca(&key, false), &key.serialize_pem(), NOW_MS / 1000).await);
    assert!(plain.contains("not a CA"), "{plain}");
    let other = KeyPair::generate().unwrap();
    let misfit =
        refused(AgentCa::import(&vault, &operator_ca(&key, true), &other.serialize_pem(), NOW_MS / 1000).await);
    assert!(misfit.contains("does not fit"), "{misfit}");
    let p384 = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap();
    let curve = refused(AgentCa::import(&vault, &operator_ca(&p384, true), &p384.serialize_pem(), NOW_MS / 1000).await);
    assert!(curve.contains("P-256"), "{curve}");

    let cert_pem = operator_ca(&key, true);
    let imported = AgentCa::import(&vault, &cert_pem, &key.serialize_pem(), NOW_MS / 1000).await.unwrap();
    let ca = AgentCa::load_or_create(&vault, NOW_MS / 1000).await.unwrap().unwrap();
    assert_eq!((ca.generation(), ca.fingerprint()), (1, imported.fingerprint.as_str()), "used, not replaced");
    let issued = ca.issue("agt-0123", &request(), 3600, NOW_MS, "enrollment").unwrap();
    let leaf = CertificateDer::from_pem_slice(issued.pem.as_bytes()).unwrap();
    verifier_of(&[&cert_pem]).verify_client_cert(&leaf, &[], during()).expect("signed by the operator's CA");
    let again = refused(AgentCa::import(&vault, &cert_pem, &key.serialize_pem(), NOW_MS / 1000).await);
    assert!(again.contains("rotate"), "{again}");
}

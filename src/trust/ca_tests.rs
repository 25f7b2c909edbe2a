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
    let row = store.secrets.secret(crate::sealing::vault::INTERNAL, CA_SECRET).await.unwrap().unwrap();
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

    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).unwrap()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider).build().unwrap();
    let during = UnixTime::since_unix_epoch(std::time::Duration::from_millis((NOW_MS + 60_000) as u64));
    verifier.verify_client_cert(&leaf, &[], during).expect("rustls accepts it as a client certificate");
    let after = UnixTime::since_unix_epoch(std::time::Duration::from_millis((NOW_MS + 3_700_000) as u64));
    assert!(verifier.verify_client_cert(&leaf, &[], after).is_err(), "not once it expired");

    assert!(matches!(ca.issue("agt-0123", "not a request", 60, NOW_MS, "x"), Err(TrustError::BadRequest(_))));
}

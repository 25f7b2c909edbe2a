//! The server's signer against the agent's own check (toolgate_agent::signed): a frame signed
//! now opens for an agent that pinned the first CA generation, and still after a rotation (the
//! next key is certified by the next generation, reached through its cross-signed certificate).

use toolgate_domain::fleet::wire::ServerMessage;
use toolgate_store::SqliteStore;

use super::*;
use crate::sealing::vault::KeySource;

const NOW_MS: i64 = 1_800_000_000_000;

fn quarantine() -> ServerMessage {
    ServerMessage::Quarantine { quarantined: true, reason: None }
}

#[tokio::test]
async fn agents_that_pinned_the_first_ca_take_frames_signed_before_and_after_a_rotation() {
    let store = SqliteStore::open_in_memory().unwrap().repositories();
    let kek = crate::sealing::keyring::generate(1);
    let vault = Vault::open(KeySource::Variable(kek), store.secrets.clone(), NOW_MS / 1000).await.unwrap();
    let ca = AgentCa::load_or_create(&vault, NOW_MS / 1000).await.unwrap().unwrap();
    let state = tempfile::tempdir().unwrap();
    toolgate_agent::signed::pin_once(state.path(), ca.chain_pem()).unwrap();
    let pinned = toolgate_agent::signed::load(state.path()).unwrap().unwrap();
    let payload = serde_json::to_string(&quarantine()).unwrap();

    let signer = FrameSigner::load_or_create(&vault, &ca, NOW_MS).await.unwrap();
    let again = FrameSigner::load_or_create(&vault, &ca, NOW_MS).await.unwrap();
    assert_eq!(again.info().fingerprint, signer.info().fingerprint, "kept, not made again");
    let frame = signer.sign(payload.clone(), "agt-1", None, NOW_MS + 60_000).unwrap();
    assert_eq!(pinned.open(&frame, "agt-1", NOW_MS).unwrap(), quarantine());

    AgentCa::rotate(&vault, NOW_MS / 1000).await.unwrap();
    let rotated = AgentCa::load_or_create(&vault, NOW_MS / 1000).await.unwrap().unwrap();
    let next = FrameSigner::load_or_create(&vault, &rotated, NOW_MS).await.unwrap();
    assert_eq!((next.info().generation, next.info().ca_generation), (2, 2), "a new key for the new CA");
    let frame = next.sign(payload, "agt-1", None, NOW_MS + 60_000).unwrap();
    assert_eq!(pinned.open(&frame, "agt-1", NOW_MS).unwrap(), quarantine(), "through the cross-signed CA");
    // Less than 30 days left: the next start makes the next key.
    let late = NOW_MS + 340 * 86_400_000;
    assert_eq!(FrameSigner::load_or_create(&vault, &rotated, late).await.unwrap().info().generation, 3);
}

//! Plugin secrets on every backend: writes conditional on the version they replace, listing
//! without ciphertexts, rewraps that never touch a row twice or one set meanwhile, and KEK
//! versions activated once each.

use toolgate_domain::plugin_secrets::{KekVersion, SecretRow};
use toolgate_store::Repositories;

crate::matrix!(secrets_are_written_only_over_the_version_they_replace, a_rewrap_touches_each_row_once);

fn row(plugin: &str, key: &str, version: u32, kek: u32) -> SecretRow {
    SecretRow {
        plugin: plugin.into(),
        key: key.into(),
        version,
        kek_version: kek,
        wrapped_key: vec![kek as u8; 72],
        ciphertext: vec![version as u8; 40],
        updated_at: 100 + version as i64,
        updated_by: "admin".into(),
    }
}

async fn secrets_are_written_only_over_the_version_they_replace(r: Repositories) {
    let s = &r.secrets;
    assert!(s.put_secret(&row("backup", "token", 1, 1), None).await.unwrap());
    assert!(!s.put_secret(&row("backup", "token", 1, 1), None).await.unwrap(), "it exists already");
    assert!(!s.put_secret(&row("backup", "token", 3, 1), Some(2)).await.unwrap(), "not over a version it did not read");
    assert!(s.put_secret(&row("backup", "token", 2, 1), Some(1)).await.unwrap());
    assert_eq!(s.secret("backup", "token").await.unwrap(), Some(row("backup", "token", 2, 1)));
    s.put_secret(&row("backup", "url", 1, 1), None).await.unwrap();
    s.put_secret(&row("sync", "key", 1, 1), None).await.unwrap();
    let listed = s.secrets(Some("backup")).await.unwrap();
    assert_eq!(listed.iter().map(|m| (m.key.as_str(), m.version)).collect::<Vec<_>>(), [("token", 2), ("url", 1)]);
    assert_eq!(s.secrets(None).await.unwrap().len(), 3);
    let gone = s.delete_secret("backup", "token").await.unwrap().unwrap();
    assert_eq!((gone.version, gone.kek_version), (2, 1));
    assert_eq!(s.delete_secret("backup", "token").await.unwrap(), None);
    assert_eq!(s.secret("backup", "token").await.unwrap(), None);
}

async fn a_rewrap_touches_each_row_once(r: Repositories) {
    let s = &r.secrets;
    for i in 0..5 {
        s.put_secret(&row("p", &format!("k{i}"), 1, 1), None).await.unwrap();
    }
    let first = s.wrapped_below(2, 2).await.unwrap();
    assert_eq!(first.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(), ["k0", "k1"]);
    for old in &first {
        assert!(
            s.rewrap_secret(&SecretRow { kek_version: 2, wrapped_key: vec![2; 72], ..old.clone() }, 1).await.unwrap()
        );
        assert!(!s.rewrap_secret(&SecretRow { kek_version: 2, ..old.clone() }, 1).await.unwrap(), "never twice");
    }
    // One set again meanwhile (version 2) is not rewrapped from the row read before.
    let stale = s.wrapped_below(2, 10).await.unwrap();
    assert_eq!(stale.len(), 3);
    s.put_secret(&row("p", "k2", 2, 2), Some(1)).await.unwrap();
    assert!(!s.rewrap_secret(&SecretRow { kek_version: 2, ..stale[0].clone() }, 1).await.unwrap());
    assert_eq!(s.wrapped_below(2, 10).await.unwrap().len(), 2, "k3 and k4 remain");
    let v1 = KekVersion { version: 1, fingerprint: "f1".into(), activated_at: 1, activated_by: "start".into() };
    assert!(s.activate_kek(&v1).await.unwrap());
    assert!(!s.activate_kek(&KekVersion { fingerprint: "other".into(), ..v1.clone() }).await.unwrap());
    assert_eq!(s.kek_versions().await.unwrap(), vec![v1]);
}

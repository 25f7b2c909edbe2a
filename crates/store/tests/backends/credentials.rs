//! Principals, tokens and console sign-in, on every backend.

use toolgate_domain::lockout::Attempt;
use toolgate_domain::tokens::{Authentication, NewToken, TOKEN_PREFIX};
use toolgate_store::{Repositories, SignInRecord};

crate::matrix!(
    tokens_authenticate_until_revoked_or_expired,
    rotation_is_confirmed_only_with_the_successor_secret,
    passwords_factors_steps_and_lockouts,
    a_totp_step_is_taken_once_however_many_ask_at_once,
    a_burst_of_attempts_is_counted_atomically,
);

fn new_token<'a>(principal: &'a str, tier: Option<&'a str>, now: i64, expires_at: i64) -> NewToken<'a> {
    NewToken { principal, tier, name: "t", now, expires_at, toolsets: None }
}

async fn tokens_authenticate_until_revoked_or_expired(r: Repositories) {
    let store = &r.credentials;
    store.put_principal("alice", &["Viewer".into()], 0).await.unwrap();
    let (record, secret) = store.create_token(new_token("alice", Some("readonly"), 0, 100)).await.unwrap();
    assert!(secret.starts_with(TOKEN_PREFIX) && secret.len() > 40);
    assert!(matches!(store.authenticate(&secret, 50).await.unwrap(), Authentication::Valid { .. }));
    assert_eq!(store.authenticate(&secret, 100).await.unwrap(), Authentication::Expired);
    assert_eq!(store.authenticate("tg_nope", 50).await.unwrap(), Authentication::Unknown);
    assert!(store.revoke_token(&record.id, 60).await.unwrap());
    assert!(!store.revoke_token(&record.id, 61).await.unwrap());
    assert_eq!(store.authenticate(&secret, 50).await.unwrap(), Authentication::Revoked);
    let (_, other) = store.create_token(new_token("alice", None, 0, 100)).await.unwrap();
    assert_eq!(store.tokens(Some("alice")).await.unwrap().len(), 2);
    assert_eq!(store.tokens(Some("bob")).await.unwrap().len(), 0);
    assert_eq!(store.remove_principal("alice", 70).await.unwrap(), Ok(true));
    assert_eq!(store.authenticate(&other, 70).await.unwrap(), Authentication::Revoked, "removal revokes");
    assert_eq!(store.principal_count().await.unwrap(), 0);
}

async fn rotation_is_confirmed_only_with_the_successor_secret(r: Repositories) {
    let store = &r.credentials;
    store.put_principal("alice", &["Viewer".into()], 0).await.unwrap();
    let chosen = NewToken { toolsets: Some("fleet,executions"), ..new_token("alice", Some("readonly"), 0, 10_000) };
    let (old, _) = store.create_token(chosen).await.unwrap();
    assert_eq!(store.token(&old.id).await.unwrap().unwrap().toolsets.as_deref(), Some("fleet,executions"));
    let (new, secret) = store.rotate_token(&old, 100, old.expires_at, 10).await.unwrap();
    assert_eq!(new.toolsets.as_deref(), Some("fleet,executions"), "a successor shows what its predecessor did");
    assert_eq!(store.token(&new.id).await.unwrap().unwrap().toolsets, new.toolsets);
    assert_eq!(store.token(&old.id).await.unwrap().unwrap().expires_at, 110, "overlap shortens the old one");
    assert_eq!(store.confirm_rotation(&new.id, "tg_wrong", "alice", 20).await.unwrap(), None);
    assert_eq!(store.confirm_rotation(&new.id, &secret, "bob", 20).await.unwrap(), None);
    assert_eq!(store.confirm_rotation(&new.id, &secret, "alice", 20).await.unwrap(), Some(old.id.clone()));
    assert!(store.token(&old.id).await.unwrap().unwrap().revoked_at.is_some());
}

async fn passwords_factors_steps_and_lockouts(r: Repositories) {
    let store = &r.sign_in;
    assert_eq!(store.sign_in_record("alice").await.unwrap(), None, "no such principal");
    assert!(!store.set_password("alice", "h").await.unwrap(), "no password for a principal that does not exist");
    r.credentials.put_principal("alice", &["Administrator".into()], 1).await.unwrap();
    assert_eq!(store.sign_in_record("alice").await.unwrap(), Some(SignInRecord::default()));
    assert!(store.set_password("alice", "$argon2id$...").await.unwrap());
    store.begin_totp("alice", "SECRET1").await.unwrap();
    store.begin_totp("alice", "SECRET2").await.unwrap();
    let rec = store.sign_in_record("alice").await.unwrap().unwrap();
    assert_eq!((rec.totp_secret.as_deref(), rec.totp_confirmed), (Some("SECRET2"), false), "unconfirmed: replaced");
    store.confirm_totp("alice", 5).await.unwrap();
    store.begin_totp("alice", "SECRET3").await.unwrap();
    let rec = store.sign_in_record("alice").await.unwrap().unwrap();
    assert_eq!((rec.totp_secret.as_deref(), rec.totp_confirmed), (Some("SECRET2"), true), "confirmed: kept");
    assert!(store.take_totp_step("alice", 100).await.unwrap());
    assert!(!store.take_totp_step("alice", 100).await.unwrap(), "a step is taken once");
    assert!(!store.take_totp_step("alice", 99).await.unwrap(), "an earlier step too");
    assert!(store.take_totp_step("alice", 101).await.unwrap());
    assert_eq!(store.count_attempt("nobody", 1000).await.unwrap(), Attempt::Unknown);
    for failures in 1..=4 {
        assert_eq!(store.count_attempt("alice", 1000).await.unwrap(), Attempt::Counted { failures });
    }
    assert_eq!(
        store.count_attempt("alice", 1000).await.unwrap(),
        Attempt::Counted { failures: 5 },
        "the 5th is checked"
    );
    assert_eq!(store.count_attempt("alice", 1000).await.unwrap(), Attempt::Locked { until_ms: 31_000 });
    let rec = store.sign_in_record("alice").await.unwrap().unwrap();
    assert_eq!((rec.failed_attempts, rec.locked_until_ms), (5, 31_000), "a locked attempt is not counted");
    assert_eq!(store.count_attempt("alice", 31_000).await.unwrap(), Attempt::Counted { failures: 6 }, "then one");
    assert_eq!(store.count_attempt("alice", 31_001).await.unwrap(), Attempt::Locked { until_ms: 91_000 });
    store.sign_in_succeeded("alice").await.unwrap();
    assert_eq!(store.sign_in_record("alice").await.unwrap().unwrap().failed_attempts, 0);
    assert!(store.reset_totp("alice").await.unwrap());
    assert!(!store.reset_totp("alice").await.unwrap(), "nothing left to reset");
    assert_eq!(r.credentials.remove_principal("alice", 9).await.unwrap(), Ok(true));
    r.credentials.put_principal("alice", &["Administrator".into()], 10).await.unwrap();
    assert_eq!(store.sign_in_record("alice").await.unwrap(), Some(SignInRecord::default()), "removal forgets it");
}

/// A parallel burst is counted one attempt at a time: exactly LOCK_AFTER are let through to
/// be checked, the rest find the lock.
async fn a_burst_of_attempts_is_counted_atomically(r: Repositories) {
    r.credentials.put_principal("bob", &["Administrator".into()], 1).await.unwrap();
    let attempts = (0..100).map(|_| {
        let store = r.sign_in.clone();
        tokio::spawn(async move { store.count_attempt("bob", 1000).await.unwrap() })
    });
    let mut checked = 0;
    for attempt in attempts.collect::<Vec<_>>() {
        if let Attempt::Counted { .. } = attempt.await.unwrap() {
            checked += 1;
        }
    }
    assert_eq!(checked, toolgate_domain::lockout::LOCK_AFTER);
    assert_eq!(r.sign_in.sign_in_record("bob").await.unwrap().unwrap().failed_attempts, 5);
}

async fn a_totp_step_is_taken_once_however_many_ask_at_once(r: Repositories) {
    r.credentials.put_principal("alice", &["Administrator".into()], 1).await.unwrap();
    r.sign_in.begin_totp("alice", "SECRET").await.unwrap();
    let attempts = (0..16).map(|_| {
        let store = r.sign_in.clone();
        tokio::spawn(async move { store.take_totp_step("alice", 7).await.unwrap() })
    });
    let taken = futures_util::future::join_all(attempts).await.into_iter().filter(|t| *t.as_ref().unwrap()).count();
    assert_eq!(taken, 1, "one code, one sign-in");
}

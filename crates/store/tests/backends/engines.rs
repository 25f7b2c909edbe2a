//! Engine principals on every backend: created only for a person owner and a free name, kept
//! as a principal of kind `engine`, revoked with every credential at once, transferred only
//! to a person; a person who owns one is not removed.

use toolgate_domain::engines::{EngineRefusal, NewEngine, PrincipalKind};
use toolgate_domain::tokens::{Authentication, NewToken, RotationResolution};
use toolgate_store::{Repositories, RevokeEngine};

crate::matrix!(
    engines_are_owned_by_people_and_revoked_with_their_credentials,
    an_owner_is_not_removed_while_it_owns_one,
    a_rotation_is_confirmed_once_or_lapses_by_itself,
);

fn engine<'a>(id: &'a str, owner: &'a str) -> NewEngine<'a> {
    NewEngine {
        principal_id: id,
        display_name: "CI deploys",
        owner,
        justification: "ships releases",
        classification: "internal",
        requests_per_minute: Some(60),
        concurrent_requests: None,
        created_by: "admin",
        now: 100,
    }
}

fn revoke(id: &str, now: i64) -> RevokeEngine<'_> {
    RevokeEngine { principal_id: id, reason: Some("retired"), superseded_by: None, now }
}

async fn engines_are_owned_by_people_and_revoked_with_their_credentials(r: Repositories) {
    let e = &r.engines;
    r.credentials.put_principal("alice", &["Viewer".into()], 0).await.unwrap();
    assert_eq!(
        e.create_engine(engine("engine:ci", "nobody")).await.unwrap(),
        Err(EngineRefusal::UnknownOwner("nobody".into()))
    );
    let created = e.create_engine(engine("engine:ci", "alice")).await.unwrap().unwrap();
    assert_eq!(
        (created.owner.as_str(), created.requests_per_minute, created.concurrent_requests),
        ("alice", Some(60), None)
    );
    assert_eq!(
        e.create_engine(engine("engine:ci", "alice")).await.unwrap(),
        Err(EngineRefusal::NameTaken("engine:ci".into()))
    );
    assert_eq!(
        e.create_engine(engine("engine:other", "engine:ci")).await.unwrap(),
        Err(EngineRefusal::OwnerIsEngine("engine:ci".into())),
        "only a person owns one"
    );
    let principal = r.credentials.principal("engine:ci").await.unwrap().unwrap();
    assert_eq!((principal.kind, principal.roles.len()), (PrincipalKind::Engine, 0));
    assert_eq!(r.credentials.principal("alice").await.unwrap().unwrap().kind, PrincipalKind::Person);

    let token = |name| NewToken {
        principal: "engine:ci",
        tier: Some("readonly"),
        name,
        now: 100,
        expires_at: 10_000,
        toolsets: None,
    };
    let (_, first) = r.credentials.create_token(token("a")).await.unwrap();
    let (_, second) = r.credentials.create_token(token("b")).await.unwrap();
    assert!(matches!(r.credentials.authenticate(&first, 200).await.unwrap(), Authentication::Valid { .. }));
    let revoked = e.revoke_engine(revoke("engine:ci", 300)).await.unwrap().unwrap();
    assert_eq!((revoked.changed, revoked.credentials_revoked, revoked.record.revoked_at), (true, 2, Some(300)));
    assert_eq!(revoked.record.revoke_reason.as_deref(), Some("retired"));
    for secret in [&first, &second] {
        assert_eq!(r.credentials.authenticate(secret, 301).await.unwrap(), Authentication::Revoked);
    }
    let again = e.revoke_engine(revoke("engine:ci", 400)).await.unwrap().unwrap();
    assert_eq!((again.changed, again.record.revoked_at), (false, Some(300)), "revoking a revoked one changes nothing");
    assert_eq!(
        e.revoke_engine(revoke("engine:nope", 400)).await.unwrap(),
        Err(EngineRefusal::Unknown("engine:nope".into()))
    );
    assert_eq!(e.transfer_engine("engine:ci", "alice").await.unwrap(), Err(EngineRefusal::Revoked("engine:ci".into())));

    e.create_engine(NewEngine { now: 500, ..engine("engine:next", "alice") }).await.unwrap().unwrap();
    assert_eq!(
        e.engines(false).await.unwrap().iter().map(|x| x.principal_id.as_str()).collect::<Vec<_>>(),
        ["engine:next"]
    );
    assert_eq!(e.engines(true).await.unwrap().len(), 2);
    let superseded = RevokeEngine { superseded_by: Some("engine:gone"), ..revoke("engine:next", 600) };
    assert_eq!(e.revoke_engine(superseded).await.unwrap(), Err(EngineRefusal::Unknown("engine:gone".into())));
}

async fn an_owner_is_not_removed_while_it_owns_one(r: Repositories) {
    let e = &r.engines;
    r.credentials.put_principal("alice", &[], 0).await.unwrap();
    r.credentials.put_principal("bob", &[], 0).await.unwrap();
    e.create_engine(engine("engine:ci", "alice")).await.unwrap().unwrap();
    e.create_engine(engine("engine:nightly", "alice")).await.unwrap().unwrap();
    assert_eq!(
        r.credentials.remove_principal("alice", 100).await.unwrap(),
        Err(EngineRefusal::OwnsEngines { owner: "alice".into(), engines: "engine:ci, engine:nightly".into() })
    );
    assert_eq!(
        r.credentials.remove_principal("engine:ci", 100).await.unwrap(),
        Err(EngineRefusal::IsEngine("engine:ci".into()))
    );
    assert_eq!(
        e.transfer_engine("engine:ci", "nobody").await.unwrap(),
        Err(EngineRefusal::UnknownOwner("nobody".into()))
    );
    let (previous, after) = e.transfer_engine("engine:ci", "bob").await.unwrap().unwrap();
    assert_eq!((previous.as_str(), after.owner.as_str()), ("alice", "bob"));
    e.revoke_engine(revoke("engine:nightly", 200)).await.unwrap().unwrap();
    assert_eq!(
        r.credentials.remove_principal("alice", 300).await.unwrap(),
        Ok(true),
        "a revoked one does not hold her"
    );
}

/// A rotation: both credentials work in the overlap; confirming takes the successor's secret,
/// revokes the predecessor and resolves it once; one never confirmed lapses when the overlap
/// ends, resolved as expired exactly once.
async fn a_rotation_is_confirmed_once_or_lapses_by_itself(r: Repositories) {
    let c = &r.credentials;
    c.put_principal("alice", &[], 0).await.unwrap();
    r.engines.create_engine(engine("engine:ci", "alice")).await.unwrap().unwrap();
    let token = |name| NewToken {
        principal: "engine:ci",
        tier: Some("readonly"),
        name,
        now: 100,
        expires_at: 100_000,
        toolsets: None,
    };
    let (first, first_secret) = c.create_token(token("a")).await.unwrap();
    let (second, second_secret) = c.rotate_token(&first, 1_000, 200_000, 200).await.unwrap();
    assert_eq!(second.expires_at, 200_000);
    let rotation = c.rotation(&second.id).await.unwrap().unwrap();
    assert_eq!((rotation.predecessor_id.as_str(), rotation.overlap_ends_at), (first.id.as_str(), 1_200));
    assert!(rotation.is_pending(300));
    for secret in [&first_secret, &second_secret] {
        assert!(
            matches!(c.authenticate(secret, 300).await.unwrap(), Authentication::Valid { .. }),
            "both in the overlap"
        );
    }
    assert_eq!(c.confirm_rotation(&second.id, &first_secret, "engine:ci", 400).await.unwrap(), None, "not its secret");
    assert_eq!(c.confirm_rotation(&second.id, &second_secret, "engine:ci", 400).await.unwrap(), Some(first.id.clone()));
    assert_eq!(c.confirm_rotation(&second.id, &second_secret, "engine:ci", 401).await.unwrap(), None, "once");
    let confirmed = c.rotation(&second.id).await.unwrap().unwrap();
    assert_eq!((confirmed.resolution, confirmed.resolved_at), (Some(RotationResolution::Confirmed), Some(400)));
    assert!(!confirmed.is_pending(401));
    assert_eq!(c.authenticate(&first_secret, 401).await.unwrap(), Authentication::Revoked);

    let (third, _) = c.rotate_token(&second, 500, 300_000, 1_000).await.unwrap();
    assert!(c.resolve_lapsed_rotations(1_499).await.unwrap().is_empty(), "still in the overlap");
    let lapsed = c.resolve_lapsed_rotations(1_500).await.unwrap();
    assert_eq!(lapsed.iter().map(|x| x.successor_id.as_str()).collect::<Vec<_>>(), [third.id.as_str()]);
    assert_eq!(lapsed[0].resolution, Some(RotationResolution::Expired));
    assert!(c.resolve_lapsed_rotations(2_000).await.unwrap().is_empty(), "resolved once");
    assert_eq!(c.rotations("engine:ci").await.unwrap().len(), 2);
}

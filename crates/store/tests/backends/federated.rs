//! People's links to their identity provider on every backend: provisioned once per (issuer,
//! subject) under a free name, linked beforehand only to a person with no link, refreshed on
//! sign-in, and gone with the principal.

use toolgate_domain::engines::{NewEngine, PrincipalKind};
use toolgate_store::{LinkRefusal, NewFederated, Repositories};

crate::matrix!(first_sign_in_provisions_once_under_a_free_name, links_are_one_to_one_and_go_with_the_principal);

const IDP: &str = "https://idp.example.com";

fn first<'a>(subject: &'a str, hint: &'a str, now: i64) -> NewFederated<'a> {
    NewFederated {
        issuer: IDP,
        subject,
        name_hint: hint,
        display_name: Some("Ana"),
        email: Some("ana@example.com"),
        now,
    }
}

async fn first_sign_in_provisions_once_under_a_free_name(r: Repositories) {
    let f = &r.federated;
    r.credentials.put_principal("ana", &["Viewer".into()], 0).await.unwrap();
    assert_eq!(f.federated(IDP, "sub-1").await.unwrap(), None);
    let made = f.provision_federated(first("sub-1", "ana", 10)).await.unwrap();
    assert_eq!(made.principal, "ana-2", "a taken name gets a counter, never the other person's principal");
    let principal = r.credentials.principal("ana-2").await.unwrap().unwrap();
    assert_eq!((principal.kind, principal.roles.len()), (PrincipalKind::Person, 0), "a person with no roles");
    let again = f.provision_federated(first("sub-1", "someone-else", 20)).await.unwrap();
    assert_eq!(again, made, "a second first sign-in answers the existing link");
    assert_eq!(f.federated(IDP, "sub-1").await.unwrap(), Some(made.clone()));
    f.seen_federated(IDP, "sub-1", Some("Ana María"), None, 30).await.unwrap();
    let seen = f.federated(IDP, "sub-1").await.unwrap().unwrap();
    assert_eq!(
        (seen.display_name.as_deref(), seen.email.as_deref(), seen.last_seen_at),
        (Some("Ana María"), Some("ana@example.com"), Some(30)),
        "what the provider did not say stays"
    );
    let other_issuer = NewFederated { issuer: "https://other.example", ..first("sub-1", "ana", 40) };
    assert_eq!(f.provision_federated(other_issuer).await.unwrap().principal, "ana-3", "subjects are per issuer");
}

async fn links_are_one_to_one_and_go_with_the_principal(r: Repositories) {
    let f = &r.federated;
    r.credentials.put_principal("bob", &[], 0).await.unwrap();
    r.credentials.put_principal("carol", &[], 0).await.unwrap();
    assert_eq!(
        f.link_federated("nobody", IDP, "s", 1).await.unwrap(),
        Err(LinkRefusal::UnknownPrincipal("nobody".into()))
    );
    let engine = NewEngine {
        principal_id: "engine:ci",
        display_name: "CI",
        owner: "bob",
        justification: "j",
        classification: "internal",
        requests_per_minute: None,
        concurrent_requests: None,
        created_by: "bob",
        now: 1,
    };
    r.engines.create_engine(engine).await.unwrap().unwrap();
    assert_eq!(f.link_federated("engine:ci", IDP, "s", 1).await.unwrap(), Err(LinkRefusal::Engine("engine:ci".into())));
    let linked = f.link_federated("bob", IDP, "sub-bob", 2).await.unwrap().unwrap();
    assert_eq!((linked.principal.as_str(), linked.last_seen_at), ("bob", None));
    let taken = LinkRefusal::SubjectLinked { principal: "bob".into(), issuer: IDP.into(), subject: "sub-bob".into() };
    assert_eq!(f.link_federated("carol", IDP, "sub-bob", 3).await.unwrap(), Err(taken));
    let twice = LinkRefusal::PrincipalLinked { principal: "bob".into(), issuer: IDP.into(), subject: "sub-bob".into() };
    assert_eq!(f.link_federated("bob", IDP, "sub-other", 3).await.unwrap(), Err(twice));
    assert_eq!(f.federated_identities(None).await.unwrap().len(), 1);
    assert_eq!(f.federated_identities(Some("carol")).await.unwrap(), vec![]);
    assert_eq!(
        r.credentials.remove_principal("bob", 4).await.unwrap(),
        Err(toolgate_domain::engines::EngineRefusal::OwnsEngines { owner: "bob".into(), engines: "engine:ci".into() })
    );
    r.engines
        .revoke_engine(toolgate_store::RevokeEngine {
            principal_id: "engine:ci",
            reason: None,
            superseded_by: None,
            now: 5,
        })
        .await
        .unwrap()
        .unwrap();
    let removed = r.credentials.remove_principal("bob", 6).await.unwrap();
    assert_eq!(removed, Ok(true));
    assert_eq!(f.federated(IDP, "sub-bob").await.unwrap(), None, "the link goes with the principal");
    f.link_federated("carol", IDP, "sub-bob", 7).await.unwrap().unwrap();
}

//! People's links to their identity provider on every backend: provisioned once per (issuer,
//! subject) under a free name, linked beforehand only to a person with no link, refreshed on
//! sign-in, and gone with the principal.

use toolgate_domain::engines::{NewEngine, PrincipalKind};
use toolgate_domain::reviews::IdpGrant;
use toolgate_store::{LinkRefusal, NewFederated, Repositories, Seen};

crate::matrix!(
    first_sign_in_provisions_once_under_a_free_name,
    links_are_one_to_one_and_go_with_the_principal,
    a_review_lists_idp_grants_and_closing_leaves_them_to_the_idp,
);

const IDP: &str = "https://idp.example.com";

fn first<'a>(subject: &'a str, hint: &'a str, now: i64) -> NewFederated<'a> {
    NewFederated {
        issuer: IDP,
        subject,
        name_hint: hint,
        display_name: Some("Ana"),
        email: Some("ana@example.com"),
        idp_grants: &[],
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
    let grants =
        [IdpGrant { role: "Viewer".into(), group_id: String::new(), idp_groups: vec!["fleet-viewers".into()] }];
    let seen = Seen {
        issuer: IDP,
        subject: "sub-1",
        display_name: Some("Ana María"),
        email: None,
        idp_grants: &grants,
        now: 30,
    };
    f.seen_federated(seen).await.unwrap();
    let seen = f.federated(IDP, "sub-1").await.unwrap().unwrap();
    assert_eq!(
        (seen.display_name.as_deref(), seen.email.as_deref(), seen.last_seen_at),
        (Some("Ana María"), Some("ana@example.com"), Some(30)),
        "what the provider did not say stays"
    );
    assert_eq!(seen.idp_grants, grants, "the roles her groups bring, as last seen");
    let other_issuer = NewFederated { issuer: "https://other.example", ..first("sub-1", "ana", 40) };
    assert_eq!(f.provision_federated(other_issuer).await.unwrap().principal, "ana-3", "subjects are per issuer");
    // Issue 43, LOW 11: a name differing only in case was a free name, so `Admin` was made
    // beside `admin`, a look-alike. It is taken, and suffixed like any other.
    let look_alike = f.provision_federated(first("sub-9", "Admin", 50)).await.unwrap();
    r.credentials.put_principal("admin", &["Administrator".into()], 0).await.unwrap();
    let after = f.provision_federated(first("sub-10", "ADMIN", 60)).await.unwrap();
    assert_eq!((look_alike.principal.as_str(), after.principal.as_str()), ("Admin", "ADMIN-2"));
    let upper_first = f.provision_federated(first("sub-11", "ANA", 70)).await.unwrap();
    assert_eq!(upper_first.principal, "ANA-4", "`ana`, `ana-2` and `ana-3` are taken whatever their case");
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
    // Issue 43, MEDIUM 7: and its subject is blocked, so a sign-in cannot make it again.
    let blocked = f.tombstone(IDP, "sub-bob").await.unwrap().unwrap();
    assert_eq!((blocked.principal.as_str(), blocked.removed_at), ("bob", 6));
    // An administrator's link re-admits it.
    f.link_federated("carol", IDP, "sub-bob", 7).await.unwrap().unwrap();
    assert_eq!(f.tombstone(IDP, "sub-bob").await.unwrap(), None);
    assert!(!f.readmit(IDP, "sub-bob").await.unwrap(), "nothing was blocked");
    r.credentials.remove_principal("carol", 8).await.unwrap().unwrap();
    assert!(f.tombstone(IDP, "sub-bob").await.unwrap().is_some_and(|t| t.principal == "carol"));
    assert!(f.readmit(IDP, "sub-bob").await.unwrap());
    assert_eq!(f.tombstone(IDP, "sub-bob").await.unwrap(), None);
}

async fn a_review_lists_idp_grants_and_closing_leaves_them_to_the_idp(r: Repositories) {
    use toolgate_domain::reviews::{Decision, GrantKey, GrantType};
    use toolgate_store::RecordDecision;
    r.credentials.put_principal("rev", &["Administrator".into()], 0).await.unwrap();
    let grants = [
        IdpGrant {
            role: "Operator".into(),
            group_id: String::new(),
            idp_groups: vec!["fleet-ops".into(), "oncall".into()],
        },
        IdpGrant { role: "Viewer".into(), group_id: "grp-a".into(), idp_groups: vec!["team-a".into()] },
    ];
    let made = r
        .federated
        .provision_federated(NewFederated { idp_grants: &grants, ..first("sub-omar", "omar", 5) })
        .await
        .unwrap();
    let (campaign, count) = r.reviews.open_review("Q4", "rev", 10).await.unwrap();
    assert_eq!(count, 3, "rev's Administrator and omar's two grants from the IdP");
    let (_, listed) = r.reviews.review(&campaign.campaign_id).await.unwrap().unwrap();
    let idp: Vec<_> = listed.iter().filter(|g| g.key.principal_type == GrantType::Idp).collect();
    assert_eq!(idp.len(), 2);
    let operator = idp.iter().find(|g| g.key.role_name == "Operator").unwrap();
    assert_eq!(operator.holder, made.principal);
    assert_eq!(operator.source.as_deref(), Some("group(s) fleet-ops, oncall at https://idp.example.com"));
    let on_group = idp.iter().find(|g| g.key.role_name == "Viewer").unwrap();
    assert_eq!(on_group.key.group_id, "grp-a");
    let key = GrantKey {
        principal_type: GrantType::Idp,
        principal_id: made.principal.clone(),
        role_name: "Operator".into(),
        group_id: String::new(),
    };
    let flag = RecordDecision {
        campaign_id: &campaign.campaign_id,
        key,
        decision: Decision::FlaggedRevoke,
        justification: Some("left ops"),
        by: "rev",
        now: 11,
    };
    r.reviews.record_decision(flag).await.unwrap().unwrap();
    let closed = r.reviews.close_review(&campaign.campaign_id, "rev", 12, true).await.unwrap().unwrap();
    assert!(closed.applied.is_empty(), "nothing here to take away: {closed:?}");
    assert_eq!(closed.at_idp.len(), 1);
    assert_eq!(closed.at_idp[0].key.role_name, "Operator");
    assert!(closed.at_idp[0].applied_at.is_none());
    assert!(closed.at_idp[0].changed_elsewhere().unwrap().contains("remove them from that group there"));
}

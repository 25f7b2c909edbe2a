//! Access reviews on every backend: a campaign snapshots every grant (fleet-wide roles of
//! people and engine principals, roles on groups, live tokens), takes decisions but never on
//! one's own grants, and closing applies every flag at once: roles taken away, tokens revoked.

use toolgate_domain::engines::NewEngine;
use toolgate_domain::groups::ROOT_GROUP;
use toolgate_domain::records::Change;
use toolgate_domain::reviews::{Decision, GrantKey, GrantType, ReviewRefusal};
use toolgate_domain::tokens::{Authentication, NewToken};
use toolgate_store::{NewGroup, RecordDecision, Repositories};

crate::matrix!(a_campaign_snapshots_decides_and_closes_all_at_once);

fn key(principal_type: GrantType, principal_id: &str, role_name: &str, group_id: &str) -> GrantKey {
    GrantKey {
        principal_type,
        principal_id: principal_id.into(),
        role_name: role_name.into(),
        group_id: group_id.into(),
    }
}

fn decide<'a>(campaign_id: &'a str, key: GrantKey, decision: Decision, by: &'a str) -> RecordDecision<'a> {
    RecordDecision { campaign_id, key, decision, justification: Some("checked"), by, now: 20 }
}

async fn a_campaign_snapshots_decides_and_closes_all_at_once(r: Repositories) {
    let c = &r.credentials;
    c.put_principal("alice", &["Administrator".into()], 0).await.unwrap();
    c.put_principal("bob", &["Viewer".into(), "Operator".into()], 0).await.unwrap();
    let group = NewGroup {
        name: "Team",
        description: "",
        parent_id: ROOT_GROUP,
        rule: None,
        change: Change { at: 0, by: "t" },
    };
    let group = r.groups.create_group(group).await.unwrap().unwrap().id;
    c.assign_group_role("bob", &group, "Operator", Change { at: 0, by: "t" }).await.unwrap().unwrap();
    let engine = NewEngine {
        principal_id: "engine:ci",
        display_name: "ci",
        owner: "alice",
        justification: "j",
        classification: "internal",
        requests_per_minute: None,
        concurrent_requests: None,
        created_by: "alice",
        now: 0,
    };
    r.engines.create_engine(engine).await.unwrap().unwrap();
    c.put_principal("engine:ci", &["Viewer".into()], 0).await.unwrap();
    let token = |principal, tier| NewToken {
        principal,
        tier: Some(tier),
        name: "t",
        now: 0,
        expires_at: 1_000,
        toolsets: None,
    };
    let (bobs, bobs_secret) = c.create_token(token("bob", "operator")).await.unwrap();
    let (expired, _) = c.create_token(NewToken { expires_at: 5, ..token("bob", "readonly") }).await.unwrap();

    let (campaign, count) = r.reviews.open_review("Q4", "alice", 10).await.unwrap();
    assert_eq!(count, 6, "alice's, bob's two, bob's on the group, the engine's, bob's live token");
    let (_, grants) = r.reviews.review(&campaign.campaign_id).await.unwrap().unwrap();
    assert!(grants.iter().all(|g| g.key.principal_id != expired.id), "an expired token is not a grant");
    let id = campaign.campaign_id.as_str();

    let own = decide(id, key(GrantType::User, "alice", "Administrator", ""), Decision::Attested, "alice");
    assert_eq!(r.reviews.record_decision(own).await.unwrap(), Err(ReviewRefusal::OwnGrant("alice".into())));
    let tokens_owner = decide(id, key(GrantType::Token, &bobs.id, "operator", ""), Decision::Attested, "bob");
    assert_eq!(r.reviews.record_decision(tokens_owner).await.unwrap(), Err(ReviewRefusal::OwnGrant("bob".into())));
    let missing = decide(id, key(GrantType::User, "bob", "Administrator", ""), Decision::Attested, "alice");
    assert!(matches!(r.reviews.record_decision(missing).await.unwrap(), Err(ReviewRefusal::UnknownGrant { .. })));

    for (k, decision) in [
        (key(GrantType::User, "bob", "Viewer", ""), Decision::Attested),
        (key(GrantType::User, "bob", "Operator", ""), Decision::FlaggedRevoke),
        (key(GrantType::Group, "bob", "Operator", &group), Decision::FlaggedRevoke),
        (key(GrantType::Engine, "engine:ci", "Viewer", ""), Decision::Attested),
        (key(GrantType::Token, &bobs.id, "operator", ""), Decision::Attested),
    ] {
        r.reviews.record_decision(decide(id, k, decision, "alice")).await.unwrap().unwrap();
    }
    // Overwriting a decision says what it was.
    let flip = decide(id, key(GrantType::Token, &bobs.id, "operator", ""), Decision::FlaggedRevoke, "alice");
    assert_eq!(r.reviews.record_decision(flip).await.unwrap().unwrap().0, Some(Decision::Attested));
    assert_eq!(
        r.reviews.close_review(id, "carol", 30, false).await.unwrap(),
        Err(ReviewRefusal::Undecided { campaign: id.into(), count: 1 }),
        "alice's own grant is undecided"
    );
    let closed = r.reviews.close_review(id, "carol", 30, true).await.unwrap().unwrap();
    assert_eq!((closed.applied.len(), closed.undecided.len(), closed.campaign.closed_at), (3, 1, Some(30)));
    let bob = c.principal("bob").await.unwrap().unwrap();
    assert_eq!((bob.roles.clone(), bob.group_roles.len()), (vec!["Viewer".to_string()], 0));
    assert_eq!(c.authenticate(&bobs_secret, 31).await.unwrap(), Authentication::Revoked);
    assert_eq!(c.principal("engine:ci").await.unwrap().unwrap().roles, ["Viewer"]);
    let late = decide(id, key(GrantType::User, "bob", "Viewer", ""), Decision::FlaggedRevoke, "alice");
    assert_eq!(r.reviews.record_decision(late).await.unwrap(), Err(ReviewRefusal::Closed(id.into())));
    assert_eq!(r.reviews.close_review(id, "carol", 40, true).await.unwrap(), Err(ReviewRefusal::Closed(id.into())));
    assert_eq!(r.reviews.reviews().await.unwrap().len(), 1);
}

//! Human approvals, on every backend: deduplication, caps, expiry and consumption at most once.

use toolgate_domain::approvals::{
    APPROVAL_TTL_SECS, ArgumentBinding, MAX_PENDING_PER_SUBMITTER, MCP_SURFACE, Mint, REST_SURFACE, Recall, Review,
    ReviewRefusal,
};
use toolgate_store::Repositories;

crate::matrix!(
    mint_dedup_review_consume_once,
    expiry_and_caps,
    a_ticket_binds_the_secret_without_storing_it,
    sixty_four_concurrent_recalls_run_the_tool_once,
    the_cap_holds_under_concurrent_mints,
    a_ticket_is_redeemed_only_on_the_surface_that_minted_it,
    listings_page_newest_first,
    a_ticket_is_bound_to_its_plans_only_while_pending,
);

/// A held change's plan: linked when its ticket is minted (linked again, unbound, when the
/// call is submitted again), bound to the plans a person approves, and only while pending.
async fn a_ticket_is_bound_to_its_plans_only_while_pending(r: Repositories) {
    let store = &r.approvals;
    let Mint::Pending(a) =
        store.mint(MCP_SURFACE, "execute_instruction", "alice", &args("{\"p\":1}"), 100).await.unwrap()
    else {
        panic!()
    };
    assert_eq!(store.plan_of(&a.id).await.unwrap(), None);
    let approved: std::collections::BTreeMap<String, String> = [("agt-1".to_string(), "d1".to_string())].into();
    assert!(!store.bind_plans(&a.id, &approved).await.unwrap(), "no plan to bind");
    store.link_plan(&a.id, "exe-1").await.unwrap();
    assert!(store.bind_plans(&a.id, &approved).await.unwrap());
    let bound = store.plan_of(&a.id).await.unwrap().unwrap();
    assert_eq!((bound.execution_id.as_str(), bound.approved.as_ref()), ("exe-1", Some(&approved)));
    store.link_plan(&a.id, "exe-2").await.unwrap();
    let relinked = store.plan_of(&a.id).await.unwrap().unwrap();
    assert_eq!((relinked.execution_id.as_str(), relinked.approved), ("exe-2", None), "a new plan is approved anew");
    assert!(store.bind_plans(&a.id, &approved).await.unwrap());
    store.review(review(&a.id, "bob", 101)).await.unwrap().unwrap();
    assert!(!store.bind_plans(&a.id, &Default::default()).await.unwrap(), "decided: bound as it was");
    assert_eq!(store.plan_of(&a.id).await.unwrap().unwrap().approved, Some(approved));
}

/// A listing pages newest first: an offset skips exactly the rows before it, so a reader
/// that judges tickets one by one can page on without losing or repeating any.
async fn listings_page_newest_first(r: Repositories) {
    let store = &r.approvals;
    for (n, at) in [(1, 100), (2, 101), (3, 102), (4, 103), (5, 104)] {
        store.mint(MCP_SURFACE, "delete_tag", "alice", &args(&format!("{{\"k\":{n}}}")), at).await.unwrap();
    }
    let page = |offset, limit| async move {
        let rows = store.approvals(Some("pending"), Some("alice"), offset, limit).await.unwrap();
        rows.into_iter().map(|a| a.canonical_args).collect::<Vec<_>>()
    };
    assert_eq!(page(0, 2).await, ["{\"k\":5}", "{\"k\":4}"]);
    assert_eq!(page(2, 2).await, ["{\"k\":3}", "{\"k\":2}"]);
    assert_eq!(page(4, 2).await, ["{\"k\":1}"]);
    assert!(page(5, 2).await.is_empty());
}

/// The same submitter, tool and arguments over MCP and over the tool's REST twin make two
/// tickets; neither surface redeems the other's (a refusal told apart only in audit).
async fn a_ticket_is_redeemed_only_on_the_surface_that_minted_it(r: Repositories) {
    let store = &r.approvals;
    let binding = args("{\"name\":\"ci\"}");
    let Mint::Pending(rest) = store.mint(REST_SURFACE, "create_api_token", "alice", &binding, 100).await.unwrap()
    else {
        panic!()
    };
    let Mint::Pending(mcp) = store.mint(MCP_SURFACE, "create_api_token", "alice", &binding, 100).await.unwrap() else {
        panic!()
    };
    assert_ne!(rest.id, mcp.id, "never deduplicated across surfaces");
    assert_eq!((rest.surface.as_str(), mcp.surface.as_str()), (REST_SURFACE, MCP_SURFACE));
    store.review(review(&rest.id, "bob", 101)).await.unwrap().unwrap();
    assert!(matches!(
        store.recall(MCP_SURFACE, &rest.id, "create_api_token", "alice", &binding, 102).await.unwrap(),
        Recall::NotRedeemable { why: "minted by another surface" }
    ));
    assert!(matches!(
        store.recall(REST_SURFACE, &rest.id, "create_api_token", "alice", &binding, 103).await.unwrap(),
        Recall::Run(_)
    ));
}

fn review<'a>(id: &'a str, reviewer: &'a str, now: i64) -> Review<'a> {
    Review { id, reviewer, approve: true, comment: None, now }
}

fn args(text: &str) -> ArgumentBinding {
    ArgumentBinding::plain(text)
}

async fn mint_dedup_review_consume_once(r: Repositories) {
    let store = &r.approvals;
    let Mint::Pending(a) = store.mint(MCP_SURFACE, "delete_tag", "alice", &args("{\"k\":1}"), 100).await.unwrap()
    else {
        panic!()
    };
    let Mint::Pending(again) = store.mint(MCP_SURFACE, "delete_tag", "alice", &args("{\"k\":1}"), 101).await.unwrap()
    else {
        panic!()
    };
    assert_eq!(a.id, again.id, "deduplicated while pending");
    assert_eq!(
        store.recall(MCP_SURFACE, &a.id, "delete_tag", "alice", &args("{\"k\":1}"), 102).await.unwrap(),
        Recall::StillPending(a.clone())
    );
    assert_eq!(
        store.review(review(&a.id, "alice", 103)).await.unwrap(),
        Err(ReviewRefusal::OwnRequest("alice".into()))
    );
    let decided = store.review(Review { comment: Some("ok"), ..review(&a.id, "bob", 104) }).await.unwrap().unwrap();
    assert_eq!((decided.reviewer.as_deref(), decided.review_comment.as_deref()), (Some("bob"), Some("ok")));
    assert!(matches!(store.review(review(&a.id, "carol", 104)).await.unwrap(), Err(ReviewRefusal::NotPending(_))));
    assert_eq!(
        store.recall(MCP_SURFACE, &a.id, "delete_tag", "alice", &args("{\"k\":2}"), 105).await.unwrap(),
        Recall::Mismatch
    );
    assert!(matches!(
        store.recall(MCP_SURFACE, &a.id, "delete_tag", "mallory", &args("{\"k\":1}"), 105).await.unwrap(),
        Recall::NotRedeemable { .. }
    ));
    assert!(matches!(
        store.recall(MCP_SURFACE, &a.id, "delete_tag", "alice", &args("{\"k\":1}"), 106).await.unwrap(),
        Recall::Run(_)
    ));
    assert!(matches!(
        store.recall(MCP_SURFACE, &a.id, "delete_tag", "alice", &args("{\"k\":1}"), 107).await.unwrap(),
        Recall::NotRedeemable { .. }
    ));
    assert_eq!(store.approvals(Some("consumed"), Some("alice"), 0, 10).await.unwrap().len(), 1);
    assert_eq!(store.approvals(Some("pending"), None, 0, 10).await.unwrap().len(), 0);
}

async fn expiry_and_caps(r: Repositories) {
    let store = &r.approvals;
    let Mint::Pending(a) = store.mint(MCP_SURFACE, "t", "alice", &args("{}"), 0).await.unwrap() else { panic!() };
    store.review(review(&a.id, "bob", APPROVAL_TTL_SECS - 1)).await.unwrap().unwrap();
    // Approved: the week runs from the review.
    assert!(matches!(
        store.recall(MCP_SURFACE, &a.id, "t", "alice", &args("{}"), 2 * APPROVAL_TTL_SECS - 2).await.unwrap(),
        Recall::Run(_)
    ));
    let Mint::Pending(b) = store.mint(MCP_SURFACE, "t", "alice", &args("{}"), 0).await.unwrap() else { panic!() };
    store.review(review(&b.id, "bob", 10)).await.unwrap().unwrap();
    assert_eq!(
        store.recall(MCP_SURFACE, &b.id, "t", "alice", &args("{}"), 10 + APPROVAL_TTL_SECS).await.unwrap(),
        Recall::Expired
    );
    for i in 0..MAX_PENDING_PER_SUBMITTER {
        assert!(matches!(
            store.mint(MCP_SURFACE, "t", "carol", &args(&format!("{{\"i\":{i}}}")), 1).await.unwrap(),
            Mint::Pending(_)
        ));
    }
    assert_eq!(store.mint(MCP_SURFACE, "t", "carol", &args("{\"i\":99}"), 1).await.unwrap(), Mint::TooManyForSubmitter);
}

async fn a_ticket_binds_the_secret_without_storing_it(r: Repositories) {
    let store = &r.approvals;
    let bound = |digest: &str| ArgumentBinding {
        canonical: "{\"secret\":\"[redacted]\"}".into(),
        sensitive_digest: digest.into(),
    };
    let Mint::Pending(a) = store.mint(MCP_SURFACE, "t", "alice", &bound("digest-one"), 0).await.unwrap() else {
        panic!()
    };
    let Mint::Pending(b) = store.mint(MCP_SURFACE, "t", "alice", &bound("digest-two"), 0).await.unwrap() else {
        panic!()
    };
    assert_ne!(a.id, b.id, "another secret is another request");
    store.review(review(&a.id, "bob", 1)).await.unwrap().unwrap();
    assert_eq!(
        store.recall(MCP_SURFACE, &a.id, "t", "alice", &bound("digest-two"), 2).await.unwrap(),
        Recall::Mismatch
    );
    assert!(matches!(
        store.recall(MCP_SURFACE, &a.id, "t", "alice", &bound("digest-one"), 2).await.unwrap(),
        Recall::Run(_)
    ));
    assert!(!serde_json::to_string(&*a).unwrap().contains("digest-one"), "the digest is never shown");
}

async fn sixty_four_concurrent_recalls_run_the_tool_once(r: Repositories) {
    let Mint::Pending(a) = r.approvals.mint(MCP_SURFACE, "t", "alice", &args("{}"), 0).await.unwrap() else { panic!() };
    r.approvals.review(review(&a.id, "bob", 1)).await.unwrap().unwrap();
    let recalls = (0..64).map(|_| {
        let (store, id) = (r.approvals.clone(), a.id.clone());
        tokio::spawn(async move { store.recall(MCP_SURFACE, &id, "t", "alice", &args("{}"), 2).await.unwrap() })
    });
    let outcomes = futures_util::future::join_all(recalls).await;
    let runs = outcomes.iter().filter(|o| matches!(o.as_ref().unwrap(), Recall::Run(_))).count();
    assert_eq!(runs, 1, "exactly one recall runs the tool: {outcomes:?}");
}

async fn the_cap_holds_under_concurrent_mints(r: Repositories) {
    let mints = (0..MAX_PENDING_PER_SUBMITTER + 8).map(|i| {
        let store = r.approvals.clone();
        tokio::spawn(async move {
            store.mint(MCP_SURFACE, "t", "carol", &args(&format!("{{\"i\":{i}}}")), 1).await.unwrap()
        })
    });
    let outcomes = futures_util::future::join_all(mints).await;
    let minted = outcomes.iter().filter(|o| matches!(o.as_ref().unwrap(), Mint::Pending(_))).count();
    assert_eq!(minted as i64, MAX_PENDING_PER_SUBMITTER, "never past the per-submitter cap");
}

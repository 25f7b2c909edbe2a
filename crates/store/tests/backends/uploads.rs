//! Upload grants on every backend: one use, claims that lapse, content kept once per digest,
//! retention on the caller's clock, and confinement in the queries.

use toolgate_domain::groups::Reach;
use toolgate_domain::uploads::{CLAIM_LEASE_MS, GrantState, NewGrant, UploadKind, UploadRefusal};
use toolgate_store::{Claim, Finished, Repositories};

use crate::fleet_work::with_agents;

crate::matrix!(
    a_grant_is_used_once_and_its_content_read_back_in_chunks,
    claims_lapse_revocation_cuts_an_upload_and_failures_spend_the_grant,
    content_is_kept_once_per_digest_until_every_retention_ends,
    grants_are_read_only_within_the_callers_reach,
);

const T0: i64 = 1_800_000_000_000;

fn grant(id: &str, agent_id: &str, retention_secs: i64) -> NewGrant {
    NewGrant {
        grant_id: id.into(),
        agent_id: agent_id.into(),
        source_path: Some("/var/log/app.log".into()),
        expected_sha256: None,
        retention_class: "standard".into(),
        retention_secs,
        max_bytes: 10_000,
        created_at_ms: T0,
        expires_at_ms: T0 + 3_600_000,
        created_by: "alice".into(),
    }
}

fn claim<'a>(id: &'a str, agent_id: &'a str, attempt: &'a str, now_ms: i64) -> Claim<'a> {
    Claim { grant_id: id, agent_id, path: "/var/log/app.log", attempt, now_ms }
}

fn finished<'a>(id: &'a str, attempt: &'a str, sha256: &'a str, size: i64, now_ms: i64) -> Finished<'a> {
    Finished {
        grant_id: id,
        attempt,
        kind: UploadKind::File,
        sha256,
        size_bytes: size,
        chunks: 2,
        preview: "first",
        now_ms,
    }
}

/// Uploads two chunks under `attempt` and finishes.
async fn upload(r: &Repositories, id: &str, agent: &str, attempt: &str, sha: &str, at: i64) {
    let u = &r.uploads;
    u.claim_grant(&claim(id, agent, attempt, at)).await.unwrap().unwrap();
    assert!(u.put_chunk(id, attempt, 0, b"first ", at).await.unwrap());
    assert!(u.put_chunk(id, attempt, 1, b"second", at + 1).await.unwrap());
    u.finish_upload(&finished(id, attempt, sha, 12, at + 2)).await.unwrap().unwrap();
}

async fn a_grant_is_used_once_and_its_content_read_back_in_chunks(r: Repositories) {
    let agents = with_agents(&r, 2).await;
    let u = &r.uploads;
    u.mint_grant(&grant("aa01", &agents[0], 86_400)).await.unwrap();
    let open = u.grant("aa01", &Reach::Fleet).await.unwrap().unwrap();
    assert_eq!((open.state, open.state_at(T0), open.content_kept), (GrantState::Open, "open", false));
    assert_eq!(open.state_at(T0 + 3_600_000), "expired");

    let other = u.claim_grant(&claim("aa01", &agents[1], "x", T0)).await.unwrap();
    assert_eq!(other, Err(UploadRefusal::Unknown("aa01".into())), "another agent's grant is not its own");
    upload(&r, "aa01", &agents[0], "att1", "d1", T0).await;
    let stored = u.grant("aa01", &Reach::Fleet).await.unwrap().unwrap();
    assert_eq!(stored.state, GrantState::Stored);
    assert_eq!((stored.sha256.as_deref(), stored.size_bytes, stored.content_kept), (Some("d1"), Some(12), true));
    assert_eq!(stored.retained_until_ms(), Some(T0 + 2 + 86_400_000));

    let again = u.claim_grant(&claim("aa01", &agents[0], "att2", T0 + 10)).await.unwrap();
    assert_eq!(again, Err(UploadRefusal::Used { grant_id: "aa01".into(), at_ms: T0 + 2 }));
    let content = u.content("d1").await.unwrap().unwrap();
    let mut bytes = Vec::new();
    for seq in 0..content.chunks {
        bytes.extend(u.content_chunk(&content, seq).await.unwrap().unwrap());
    }
    assert_eq!(bytes, b"first second");

    u.mint_grant(&grant("aa02", &agents[0], 86_400)).await.unwrap();
    let late = u.claim_grant(&claim("aa02", &agents[0], "att3", T0 + 3_600_000)).await.unwrap();
    assert_eq!(late, Err(UploadRefusal::Expired { grant_id: "aa02".into(), at_ms: T0 + 3_600_000 }));
}

async fn claims_lapse_revocation_cuts_an_upload_and_failures_spend_the_grant(r: Repositories) {
    let agents = with_agents(&r, 1).await;
    let (u, agent) = (&r.uploads, agents[0].as_str());
    u.mint_grant(&grant("bb01", agent, 60)).await.unwrap();
    u.claim_grant(&claim("bb01", agent, "first", T0)).await.unwrap().unwrap();
    assert!(u.put_chunk("bb01", "first", 0, b"abc", T0 + 1).await.unwrap());
    let busy = u.claim_grant(&claim("bb01", agent, "second", T0 + 2)).await.unwrap();
    assert_eq!(busy, Err(UploadRefusal::InUse("bb01".into())));
    // The first holder went silent: past the lease another attempt takes over and the first
    // can no longer write; its chunks are orphans the sweep removes.
    let later = T0 + 1 + CLAIM_LEASE_MS + 1;
    u.claim_grant(&claim("bb01", agent, "second", later)).await.unwrap().unwrap();
    assert!(!u.put_chunk("bb01", "first", 1, b"def", later).await.unwrap());
    assert_eq!(u.sweep_uploads(later).await.unwrap().orphan_chunks, 1);
    // A dropped connection gives the grant back; a refusal spends it.
    u.abandon_upload("bb01", "second", None, later).await.unwrap();
    assert_eq!(u.grant("bb01", &Reach::Fleet).await.unwrap().unwrap().state, GrantState::Open);
    u.claim_grant(&claim("bb01", agent, "third", later + 1)).await.unwrap().unwrap();
    assert!(u.put_chunk("bb01", "third", 0, b"x", later + 2).await.unwrap());
    u.abandon_upload("bb01", "third", Some("more than the 10000 bytes granted"), later + 3).await.unwrap();
    let failed = u.grant("bb01", &Reach::Fleet).await.unwrap().unwrap();
    assert_eq!(
        (failed.state, failed.failure.as_deref()),
        (GrantState::Failed, Some("more than the 10000 bytes granted"))
    );
    let spent = u.claim_grant(&claim("bb01", agent, "fourth", later + 4)).await.unwrap();
    assert!(matches!(spent, Err(UploadRefusal::Failed { .. })), "{spent:?}");
    assert_eq!(u.sweep_uploads(later + 5).await.unwrap().orphan_chunks, 0, "the refused attempt's chunks went at once");

    // Revoked mid-upload: the next chunk and the finish are refused, naming who revoked it.
    u.mint_grant(&grant("bb02", agent, 60)).await.unwrap();
    u.claim_grant(&claim("bb02", agent, "a", T0)).await.unwrap().unwrap();
    let (revoked, changed) = u.revoke_grant("bb02", &Reach::Fleet, "bob", T0 + 1).await.unwrap().unwrap();
    assert!(changed && revoked.state == GrantState::Revoked);
    assert!(!u.revoke_grant("bb02", &Reach::Fleet, "bob", T0 + 2).await.unwrap().unwrap().1, "once");
    assert!(!u.put_chunk("bb02", "a", 0, b"x", T0 + 2).await.unwrap());
    let finish = u.finish_upload(&finished("bb02", "a", "d", 1, T0 + 3)).await.unwrap();
    assert_eq!(finish, Err(UploadRefusal::Revoked { grant_id: "bb02".into(), by: "bob".into() }));
    assert!(u.revoke_grant("nope", &Reach::Fleet, "bob", T0).await.unwrap().is_none());
}

async fn content_is_kept_once_per_digest_until_every_retention_ends(r: Repositories) {
    let agents = with_agents(&r, 1).await;
    let (u, agent) = (&r.uploads, agents[0].as_str());
    u.mint_grant(&grant("cc01", agent, 60)).await.unwrap();
    u.mint_grant(&grant("cc02", agent, 600)).await.unwrap();
    upload(&r, "cc01", agent, "one", "same", T0).await;
    upload(&r, "cc02", agent, "two", "same", T0 + 10).await;
    let content = u.content("same").await.unwrap().unwrap();
    assert_eq!(content.attempt, "one", "the first copy is kept; the second's chunks were dropped");
    assert_eq!(u.sweep_uploads(T0 + 10).await.unwrap(), Default::default());
    // cc01's minute ended; cc02's ten minutes keep the content.
    assert!(u.sweep_uploads(T0 + 120_000).await.unwrap().deleted.is_empty());
    // Revoking cc02 ends what it kept.
    u.revoke_grant("cc02", &Reach::Fleet, "bob", T0 + 130_000).await.unwrap().unwrap();
    let swept = u.sweep_uploads(T0 + 130_000).await.unwrap();
    assert_eq!(swept.deleted, vec![("same".to_string(), 12)]);
    assert!(u.content("same").await.unwrap().is_none());
    assert!(!u.grant("cc01", &Reach::Fleet).await.unwrap().unwrap().content_kept);
    assert_eq!(u.sweep_uploads(T0 + 140_000).await.unwrap().orphan_chunks, 0, "its chunks went with it");
}

async fn grants_are_read_only_within_the_callers_reach(r: Repositories) {
    let agents = with_agents(&r, 2).await;
    let team = crate::groups::top_group(&r, "Team").await;
    r.groups.add_member(&team.id, &agents[0]).await.unwrap().unwrap();
    let u = &r.uploads;
    u.mint_grant(&grant("dd01", &agents[0], 60)).await.unwrap();
    u.mint_grant(&NewGrant { created_at_ms: T0 + 1, ..grant("dd02", &agents[1], 60) }).await.unwrap();
    let team_reach = Reach::Groups(vec![team.id.clone()].into());
    let nowhere = Reach::Groups(vec!["mg-other".to_string()].into());
    let ids = |grants: Vec<toolgate_domain::uploads::UploadGrant>| {
        grants.into_iter().map(|g| g.minted.grant_id).collect::<Vec<_>>()
    };
    assert_eq!(ids(u.grants(&Reach::Fleet, None, 10).await.unwrap()), ["dd02", "dd01"], "newest first");
    assert_eq!(ids(u.grants(&Reach::Fleet, None, 1).await.unwrap()), ["dd02"]);
    assert_eq!(ids(u.grants(&team_reach, None, 10).await.unwrap()), ["dd01"]);
    assert_eq!(ids(u.grants(&Reach::Fleet, Some(&agents[0]), 10).await.unwrap()), ["dd01"]);
    assert!(u.grants(&nowhere, None, 10).await.unwrap().is_empty());
    assert!(u.grant("dd02", &team_reach).await.unwrap().is_none());
    assert!(u.grant("dd01", &team_reach).await.unwrap().is_some());
    assert!(u.revoke_grant("dd02", &team_reach, "bob", T0).await.unwrap().is_none(), "not within reach");
    assert_eq!(u.grant("dd02", &Reach::Fleet).await.unwrap().unwrap().state, GrantState::Open);
}

//! Issued agent certificates on every backend: recorded once per serial, paged newest first,
//! revoked within the caller's reach.

use toolgate_domain::certs::{IssuedCert, Standing};
use toolgate_domain::groups::Reach;
use toolgate_store::Repositories;

crate::matrix!(issued_certificates_are_paged_newest_first_and_unique_by_serial);
crate::matrix!(revocation_is_confined_kept_and_decides_the_standing);
crate::matrix!(revoking_the_newest_certificate_revokes_the_agents_whole_chain);

fn cert(serial: &str, issued_at_ms: i64) -> IssuedCert {
    IssuedCert {
        serial_hex: serial.into(),
        agent_id: "agt-1".into(),
        ca_generation: 1,
        not_before_ms: issued_at_ms,
        not_after_ms: issued_at_ms + 3_600_000,
        issued_at_ms,
        reason: "enrollment".into(),
        revoked: None,
    }
}

async fn issued_certificates_are_paged_newest_first_and_unique_by_serial(r: Repositories) {
    for (serial, at) in [("0a", 1), ("0b", 3), ("0c", 2)] {
        r.certs.record_issued(&cert(serial, at)).await.unwrap();
    }
    assert!(r.certs.record_issued(&cert("0a", 9)).await.is_err(), "a serial is issued once");
    let (page, total) = r.certs.issued(&Reach::Fleet, 2, 0).await.unwrap();
    let serials: Vec<&str> = page.iter().map(|c| c.serial_hex.as_str()).collect();
    assert_eq!((serials, total), (vec!["0b", "0c"], 3));
    let (rest, _) = r.certs.issued(&Reach::Fleet, 2, 2).await.unwrap();
    assert_eq!(rest, vec![cert("0a", 1)]);
    // Confined in the query: a reach over a group the agent is not in sees none, and counts none.
    let team = crate::groups::top_group(&r, "Team").await;
    let reach = Reach::Groups(vec![team.id.clone()].into());
    assert_eq!(r.certs.issued(&reach, 10, 0).await.unwrap(), (vec![], 0));
    let agents = crate::fleet_work::with_agents(&r, 1).await;
    r.groups.add_member(&team.id, &agents[0]).await.unwrap().unwrap();
    r.certs.record_issued(&IssuedCert { agent_id: agents[0].clone(), ..cert("0d", 4) }).await.unwrap();
    let (mine, total) = r.certs.issued(&reach, 10, 0).await.unwrap();
    assert_eq!((mine.len(), mine[0].serial_hex.as_str(), total), (1, "0d", 1));
}

async fn revocation_is_confined_kept_and_decides_the_standing(r: Repositories) {
    let agents = crate::fleet_work::with_agents(&r, 1).await;
    let team = crate::groups::top_group(&r, "Team").await;
    let reach = Reach::Groups(vec![team.id.clone()].into());
    let mine = IssuedCert { agent_id: agents[0].clone(), ..cert("1a", 10) };
    r.certs.record_issued(&mine).await.unwrap();
    r.certs.record_issued(&cert("1b", 11)).await.unwrap();
    assert_eq!(
        Standing::of(r.certs.newest_for(&agents[0]).await.unwrap().as_ref(), 20),
        Standing::Holds { serial_hex: "1a".into(), not_after_ms: mine.not_after_ms }
    );
    // Outside the reach (the agent is in no group yet) it is not found, and not revoked.
    assert_eq!(r.certs.revoke("1a", &reach, "alice", None, 20).await.unwrap(), None);
    assert!(r.certs.revoked_serials(20).await.unwrap().is_empty());
    r.groups.add_member(&team.id, &agents[0]).await.unwrap().unwrap();
    let (revoked, revoked_now) = r.certs.revoke("1a", &reach, "alice", Some("laptop lost"), 20).await.unwrap().unwrap();
    assert_eq!(revoked_now, ["1a"]);
    let revocation = revoked.revoked.clone().unwrap();
    assert_eq!((revocation.revoked_at_ms, revocation.revoked_by.as_str()), (20, "alice"));
    assert_eq!(revocation.reason.as_deref(), Some("laptop lost"));
    // Again: found, unchanged, the first revocation kept.
    let (again, revoked_now) = r.certs.revoke("1a", &Reach::Fleet, "bob", None, 30).await.unwrap().unwrap();
    assert_eq!((again.revoked, revoked_now), (Some(revocation), vec![]));
    assert_eq!(r.certs.revoked_serials(20).await.unwrap(), vec![("1a".to_string(), agents[0].clone())]);
    assert_eq!(r.certs.live_by_generation(20).await.unwrap(), vec![(1, 1)], "1b only: 1a is revoked");
    assert!(r.certs.live_by_generation(mine.not_after_ms + 1).await.unwrap().is_empty(), "all expired");
    // Once it would have expired, it need not be refused by serial any more.
    assert!(r.certs.revoked_serials(mine.not_after_ms).await.unwrap().is_empty());
    let standing = Standing::of(r.certs.newest_for(&agents[0]).await.unwrap().as_ref(), 20);
    assert_eq!(standing, Standing::Revoked { serial_hex: "1a".into() });
    assert_eq!(r.certs.revoke("ff", &Reach::Fleet, "alice", None, 20).await.unwrap(), None);
    assert_eq!(r.certs.newest_for("agt-none").await.unwrap(), None);
}

/// Issue 43, MEDIUM 4: after a renewal, revoking the newest serial left the older, unexpired
/// one usable to get a new certificate. Revoking any of an agent's certificates revokes all of
/// them (its chain), and none of another agent's.
async fn revoking_the_newest_certificate_revokes_the_agents_whole_chain(r: Repositories) {
    let agents = crate::fleet_work::with_agents(&r, 2).await;
    let of = |agent: &str, serial: &str, at: i64| IssuedCert { agent_id: agent.into(), ..cert(serial, at) };
    for (agent, serial, at) in [(&agents[0], "2a", 10), (&agents[0], "2b", 11), (&agents[1], "2c", 12)] {
        r.certs.record_issued(&of(agent, serial, at)).await.unwrap();
    }
    let (newest, mut revoked_now) = r.certs.revoke("2b", &Reach::Fleet, "alice", None, 20).await.unwrap().unwrap();
    revoked_now.sort();
    assert_eq!((newest.serial_hex.as_str(), revoked_now), ("2b", vec!["2a".to_string(), "2b".to_string()]));
    let mut refused = r.certs.revoked_serials(20).await.unwrap();
    refused.sort();
    let chain = [("2a".to_string(), agents[0].clone()), ("2b".to_string(), agents[0].clone())];
    assert_eq!(refused, chain, "the older one is refused too; the other agent's is not");
    let (page, _) = r.certs.issued(&Reach::Fleet, 10, 0).await.unwrap();
    let older = page.iter().find(|c| c.serial_hex == "2a").unwrap();
    assert_eq!(older.revoked.as_ref().map(|v| v.revoked_by.as_str()), Some("alice"));
    assert!(page.iter().find(|c| c.serial_hex == "2c").unwrap().revoked.is_none());
}

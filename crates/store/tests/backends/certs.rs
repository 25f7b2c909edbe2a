//! Issued agent certificates on every backend: recorded once per serial, paged newest first,
//! revoked within the caller's reach.

use toolgate_domain::certs::{IssuedCert, Standing};
use toolgate_domain::groups::Reach;
use toolgate_store::Repositories;

crate::matrix!(issued_certificates_are_paged_newest_first_and_unique_by_serial);
crate::matrix!(revocation_is_confined_kept_and_decides_the_standing);

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
    let (revoked, changed) = r.certs.revoke("1a", &reach, "alice", Some("laptop lost"), 20).await.unwrap().unwrap();
    assert!(changed);
    let revocation = revoked.revoked.clone().unwrap();
    assert_eq!((revocation.revoked_at_ms, revocation.revoked_by.as_str()), (20, "alice"));
    assert_eq!(revocation.reason.as_deref(), Some("laptop lost"));
    // Again: found, unchanged, the first revocation kept.
    let (again, changed) = r.certs.revoke("1a", &Reach::Fleet, "bob", None, 30).await.unwrap().unwrap();
    assert_eq!((again.revoked, changed), (Some(revocation), false));
    assert_eq!(r.certs.revoked_serials(20).await.unwrap(), vec!["1a".to_string()]);
    assert_eq!(r.certs.live_by_generation(20).await.unwrap(), vec![(1, 1)], "1b only: 1a is revoked");
    assert!(r.certs.live_by_generation(mine.not_after_ms + 1).await.unwrap().is_empty(), "all expired");
    // Once it would have expired, it need not be refused by serial any more.
    assert!(r.certs.revoked_serials(mine.not_after_ms).await.unwrap().is_empty());
    let standing = Standing::of(r.certs.newest_for(&agents[0]).await.unwrap().as_ref(), 20);
    assert_eq!(standing, Standing::Revoked { serial_hex: "1a".into() });
    assert_eq!(r.certs.revoke("ff", &Reach::Fleet, "alice", None, 20).await.unwrap(), None);
    assert_eq!(r.certs.newest_for("agt-none").await.unwrap(), None);
}

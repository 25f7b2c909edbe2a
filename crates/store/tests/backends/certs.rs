//! Issued agent certificates on every backend: recorded once per serial, paged newest first.

use toolgate_domain::certs::IssuedCert;
use toolgate_domain::groups::Reach;
use toolgate_store::Repositories;

crate::matrix!(issued_certificates_are_paged_newest_first_and_unique_by_serial);

fn cert(serial: &str, issued_at_ms: i64) -> IssuedCert {
    IssuedCert {
        serial_hex: serial.into(),
        agent_id: "agt-1".into(),
        ca_generation: 1,
        not_before_ms: issued_at_ms,
        not_after_ms: issued_at_ms + 3_600_000,
        issued_at_ms,
        reason: "enrollment".into(),
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

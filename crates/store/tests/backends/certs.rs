//! Issued agent certificates on every backend: recorded once per serial, paged newest first.

use toolgate_domain::certs::IssuedCert;
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
    let (page, total) = r.certs.issued(2, 0).await.unwrap();
    let serials: Vec<&str> = page.iter().map(|c| c.serial_hex.as_str()).collect();
    assert_eq!((serials, total), (vec!["0b", "0c"], 3));
    let (rest, _) = r.certs.issued(2, 2).await.unwrap();
    assert_eq!(rest, vec![cert("0a", 1)]);
}

//! Enrollment, agents and inventory, on every backend.

use serde_json::{Map, Value, json};
use toolgate_domain::fleet::agent::AgentAuth;
use toolgate_domain::fleet::wire::InventoryReport;
use toolgate_domain::fleet::{AgentStatus, EnrollRefusal, HostFacts};
use toolgate_domain::groups::Reach;
use toolgate_store::{ColumnCondition, ColumnValue, Repositories, RowFilter, RowPage, RowSource};

crate::matrix!(
    conditions_and_pages_in_sql_or_in_the_filter_agree,
    enrollment_tokens_refuse_in_their_own_words,
    the_last_use_of_an_enrollment_token_is_taken_once,
    agents_authenticate_until_revoked,
    a_filter_runs_in_chunks_outside_the_store_within_its_budget,
);

/// The listening ports of one agent, or of the whole fleet.
pub(crate) fn fleet_rows(agent_id: Option<&str>) -> RowSource {
    RowSource { table: "listening_ports".into(), agent_id: agent_id.map(str::to_string), reach: Reach::Fleet }
}

pub(crate) fn report(table: &str, ports: &[i64]) -> InventoryReport {
    let rows = ports.iter().map(|p| json!({"port": p, "process": format!("p{p}")}).as_object().unwrap().clone());
    InventoryReport { table: table.into(), collected_at_ms: 1, available: true, reason: None, rows: rows.collect() }
}

async fn conditions_and_pages_in_sql_or_in_the_filter_agree(r: Repositories) {
    let store = &r.fleet;
    let (_, secret) = store.create_enrollment_token(i64::MAX, 2, 0).await.unwrap();
    let (a, _) = store.enroll(&secret, 0).await.unwrap().unwrap();
    let (b, _) = store.enroll(&secret, 0).await.unwrap().unwrap();
    store.save_inventory(&a, report("listening_ports", &[22, 80, 443]), 2).await.unwrap();
    store.save_inventory(&b, report("listening_ports", &[22, 8080]), 2).await.unwrap();
    // A second report replaces the first.
    store.save_inventory(&b, report("listening_ports", &[22, 8080, 9090]), 3).await.unwrap();
    let not_22 = [ColumnCondition { column: "port".into(), equal: false, value: ColumnValue::Integer(22) }];
    let page = |offset, filter: Option<RowFilter>| {
        let (store, not_22) = (store.clone(), not_22.clone());
        async move { store.inventory_rows(&fleet_rows(None), &not_22, filter, offset, 2).await.unwrap() }
    };
    let ports = |p: &RowPage| p.rows.iter().map(|(_, r)| r["port"].as_i64().unwrap()).collect::<Vec<_>>();
    let (first, second) = (page(0, None).await, page(2, None).await);
    let expected: Vec<i64> = if a < b { vec![80, 443, 8080, 9090] } else { vec![8080, 9090, 80, 443] };
    assert_eq!((ports(&first), first.more), (expected[..2].to_vec(), true));
    assert_eq!((ports(&second), second.more), (expected[2..].to_vec(), false));
    // The same pages with a filter left for Rust (which keeps everything).
    let keep_all = || Some(RowFilter::new(|_: &str, _: &Map<String, Value>| true));
    assert_eq!(ports(&page(0, keep_all()).await), expected[..2].to_vec());
    assert_eq!(ports(&page(2, keep_all()).await), expected[2..].to_vec());
    let text = [ColumnCondition { column: "process".into(), equal: true, value: ColumnValue::Text("p8080".into()) }];
    let only = store.inventory_rows(&fleet_rows(Some(&b)), &text, None, 0, 10).await.unwrap();
    assert_eq!(ports(&only), [8080]);
    // A text never equals a number, as in JSON.
    let as_text = [ColumnCondition { column: "port".into(), equal: true, value: ColumnValue::Text("22".into()) }];
    assert!(store.inventory_rows(&fleet_rows(None), &as_text, None, 0, 10).await.unwrap().rows.is_empty());
    let bad = [ColumnCondition { column: "port') OR 1=1 --".into(), equal: true, value: ColumnValue::Integer(1) }];
    assert!(store.inventory_rows(&fleet_rows(None), &bad, None, 0, 10).await.is_err(), "never spliced raw");
    let status = store.inventory_status(&b).await.unwrap();
    assert_eq!((status[0].rows, status[0].collected_at_ms, status[0].received_at_ms), (3, 1, 3));
    assert_eq!(store.inventory_coverage(&Reach::Fleet).await.unwrap(), [("listening_ports".to_string(), 2, 0)]);
}

async fn enrollment_tokens_refuse_in_their_own_words(r: Repositories) {
    let store = &r.fleet;
    assert_eq!(store.enroll("tge_nope", 0).await.unwrap(), Err(EnrollRefusal::Unknown));
    let (_, once) = store.create_enrollment_token(100, 1, 0).await.unwrap();
    assert!(store.enroll(&once, 99).await.unwrap().is_ok());
    assert_eq!(store.enroll(&once, 99).await.unwrap(), Err(EnrollRefusal::UsedUp));
    let (_, late) = store.create_enrollment_token(100, 5, 0).await.unwrap();
    assert_eq!(store.enroll(&late, 100).await.unwrap(), Err(EnrollRefusal::Expired));
    let tokens = store.enrollment_tokens().await.unwrap();
    assert_eq!(tokens.iter().map(|t| t.uses).sum::<i64>(), 1);
}

async fn the_last_use_of_an_enrollment_token_is_taken_once(r: Repositories) {
    let (_, secret) = r.fleet.create_enrollment_token(i64::MAX, 3, 0).await.unwrap();
    let enrollments = (0..12).map(|_| {
        let (store, secret) = (r.fleet.clone(), secret.clone());
        tokio::spawn(async move { store.enroll(&secret, 1).await.unwrap() })
    });
    let outcomes = futures_util::future::join_all(enrollments).await;
    assert_eq!(outcomes.iter().filter(|o| o.as_ref().unwrap().is_ok()).count(), 3, "three uses, three agents");
    assert_eq!(r.fleet.agents().await.unwrap().len(), 3);
}

async fn agents_authenticate_until_revoked(r: Repositories) {
    let store = &r.fleet;
    let (_, secret) = store.create_enrollment_token(i64::MAX, 1, 0).await.unwrap();
    let (agent, credential) = store.enroll(&secret, 5).await.unwrap().unwrap();
    assert_eq!(store.authenticate_agent(&agent, &credential).await.unwrap(), AgentAuth::Valid);
    assert_eq!(store.authenticate_agent(&agent, "tga_wrong").await.unwrap(), AgentAuth::BadCredential);
    assert_eq!(store.authenticate_agent("agt-nobody", &credential).await.unwrap(), AgentAuth::Unknown);
    store.save_last_seen(&[(agent.clone(), 42)]).await.unwrap();
    let facts = HostFacts { hostname: "h1".into(), cpu_count: 2, ..HostFacts::default() };
    store.save_facts(&agent, &facts, 43).await.unwrap();
    let listed = store.agents().await.unwrap();
    assert_eq!((listed[0].last_seen_ms, listed[0].status), (Some(42), AgentStatus::Offline));
    assert_eq!((listed[0].facts.as_ref(), listed[0].facts_at_ms), (Some(&facts), Some(43)));
    assert!(store.revoke_agent(&agent, 50).await.unwrap());
    assert!(!store.revoke_agent(&agent, 51).await.unwrap());
    assert_eq!(store.authenticate_agent(&agent, &credential).await.unwrap(), AgentAuth::Revoked);
    assert_eq!(store.revoked_since(50).await.unwrap(), std::slice::from_ref(&agent));
    assert!(store.revoked_since(51).await.unwrap().is_empty());
    assert_eq!(store.agents().await.unwrap()[0].status, AgentStatus::Revoked);
}

/// Issue 27, MEDIUM 7: a filter left for Rust ran inside the store's connection with no time
/// limit (pathological globs stalled every other request). Now rows are read in chunks and
/// filtered between reads: pages across chunk boundaries are the same, the store answers
/// others while a filter is stuck, and a filter past its budget ends the page `over_budget`.
async fn a_filter_runs_in_chunks_outside_the_store_within_its_budget(r: Repositories) {
    use std::sync::{Arc, Mutex, mpsc};
    use std::time::Duration;

    let store = r.fleet.clone();
    let (_, secret) = store.create_enrollment_token(i64::MAX, 2, 0).await.unwrap();
    let (a, _) = store.enroll(&secret, 0).await.unwrap().unwrap();
    let (b, _) = store.enroll(&secret, 0).await.unwrap().unwrap();
    let ports: Vec<i64> = (1..=1200).collect();
    store.save_inventory(&a, report("listening_ports", &ports), 2).await.unwrap();
    store.save_inventory(&b, report("listening_ports", &ports), 2).await.unwrap();
    let every_7th = || RowFilter::new(|_: &str, row: &Map<String, Value>| row["port"].as_i64().unwrap() % 7 == 0);
    let mut seen = Vec::new();
    let mut offset = 0;
    loop {
        let page = store.inventory_rows(&fleet_rows(None), &[], Some(every_7th()), offset, 50).await.unwrap();
        assert!(!page.over_budget);
        // 2,400 rows, 342 kept: counted to the end within COUNT_AHEAD_ROWS (1,024) past the
        // page only near the end; a lower bound before, never more than there are.
        let counted = offset + page.rows.len() + 1024 / 7;
        match page.counted_all {
            true => assert_eq!(page.matched, 342, "offset {offset}"),
            false => {
                assert!(page.matched < 342 && page.matched >= counted.min(342) - 2, "offset {offset}: {}", page.matched)
            }
        }
        seen.extend(page.rows.iter().map(|(agent, row)| (agent.clone(), row["port"].as_i64().unwrap())));
        offset += page.rows.len();
        if !page.more {
            break;
        }
    }
    let mut expected: Vec<(String, i64)> =
        [&a, &b].iter().flat_map(|agent| (7..=1200).step_by(7).map(|p| (agent.to_string(), p))).collect();
    expected.sort();
    assert_eq!(seen, expected, "every kept row once, in agent order, across chunks and pages");

    // A filter stuck on its first row: the store still answers another request meanwhile.
    let (release, wait) = mpsc::channel::<()>();
    let wait = Arc::new(Mutex::new(wait));
    let stuck = RowFilter::new(move |_: &str, _: &Map<String, Value>| {
        let _ = wait.lock().unwrap().recv_timeout(Duration::from_secs(30));
        true
    });
    let scan = {
        let store = store.clone();
        tokio::spawn(async move { store.inventory_rows(&fleet_rows(None), &[], Some(stuck), 0, 1).await })
    };
    let agents = tokio::time::timeout(Duration::from_secs(20), store.agents()).await;
    assert_eq!(agents.expect("the store answered while the filter was stuck").unwrap().len(), 2);
    assert!(!scan.is_finished());
    release.send(()).unwrap();
    release.send(()).unwrap();
    drop(release);
    assert_eq!(scan.await.unwrap().unwrap().rows.len(), 1);

    // A slow filter past its budget: the page says so.
    let slow = RowFilter::new(|_: &str, _: &Map<String, Value>| {
        std::thread::sleep(Duration::from_millis(2));
        false
    })
    .within(Duration::from_millis(50));
    let page = store.inventory_rows(&fleet_rows(None), &[], Some(slow), 0, 10).await.unwrap();
    assert!(page.over_budget && page.rows.is_empty(), "{page:?}");
}

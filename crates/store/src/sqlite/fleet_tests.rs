//! The fleet area of the SQLite store, against a real (in-memory) database.

use serde_json::json;

use serde_json::{Map, Value};
use toolgate_domain::fleet::EnrollRefusal;
use toolgate_domain::fleet::wire::InventoryReport;

use super::SqliteStore;
use crate::{ColumnCondition, ColumnValue, FleetStore, RowFilter, RowPage};

fn report(table: &str, ports: &[i64]) -> InventoryReport {
    let rows = ports.iter().map(|p| json!({"port": p, "process": format!("p{p}")}).as_object().unwrap().clone());
    InventoryReport { table: table.into(), collected_at_ms: 1, available: true, reason: None, rows: rows.collect() }
}

#[tokio::test]
async fn conditions_and_pages_in_sql_or_in_the_filter_agree() {
    let store = SqliteStore::open_in_memory().unwrap();
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
        async move { store.inventory_rows("listening_ports", None, &not_22, filter, offset, 2).await.unwrap() }
    };
    let ports = |p: &RowPage| p.rows.iter().map(|(_, r)| r["port"].as_i64().unwrap()).collect::<Vec<_>>();
    let (first, second) = (page(0, None).await, page(2, None).await);
    let expected: Vec<i64> = if a < b { vec![80, 443, 8080, 9090] } else { vec![8080, 9090, 80, 443] };
    assert_eq!((ports(&first), first.more), (expected[..2].to_vec(), true));
    assert_eq!((ports(&second), second.more), (expected[2..].to_vec(), false));
    // The same pages with a filter left for Rust (which keeps everything).
    let keep_all = || Some(Box::new(|_: &str, _: &Map<String, Value>| true) as RowFilter);
    assert_eq!(ports(&page(0, keep_all()).await), expected[..2].to_vec());
    assert_eq!(ports(&page(2, keep_all()).await), expected[2..].to_vec());
    let text = [ColumnCondition { column: "process".into(), equal: true, value: ColumnValue::Text("p8080".into()) }];
    let only = store.inventory_rows("listening_ports", Some(&b), &text, None, 0, 10).await.unwrap();
    assert_eq!(ports(&only), [8080]);
    let status = store.inventory_status(&b).await.unwrap();
    assert_eq!((status[0].rows, status[0].collected_at_ms, status[0].received_at_ms), (3, 1, 3));
    assert_eq!(store.inventory_coverage().await.unwrap(), [("listening_ports".to_string(), 2, 0)]);
}

#[tokio::test]
async fn enrollment_tokens_refuse_in_their_own_words() {
    let store = SqliteStore::open_in_memory().unwrap();
    assert_eq!(store.enroll("tge_nope", 0).await.unwrap(), Err(EnrollRefusal::Unknown));
    let (_, once) = store.create_enrollment_token(100, 1, 0).await.unwrap();
    assert!(store.enroll(&once, 99).await.unwrap().is_ok());
    assert_eq!(store.enroll(&once, 99).await.unwrap(), Err(EnrollRefusal::UsedUp));
    let (_, late) = store.create_enrollment_token(100, 5, 0).await.unwrap();
    assert_eq!(store.enroll(&late, 100).await.unwrap(), Err(EnrollRefusal::Expired));
}

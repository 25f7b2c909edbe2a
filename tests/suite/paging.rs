//! Answers that fit a model's context: a listing tool answers one page within the budget
//! (`--page-bytes`), rows whole, with how many more match and the cursor for them.

use crate::common;

use std::collections::BTreeSet;

use common::agents::*;
use common::raw_agent::*;
use serde_json::{Value, json};

const ROWS: usize = 10_000;

/// An agent whose installed_software is `ROWS` packages, sent by hand on a report connection
/// after the real agent (stopped) reported its own; some names carry what escaping makes longer.
fn ten_thousand_packages(s: &common::Server, schemas: &std::collections::HashMap<String, Value>) -> String {
    let states = tempfile::tempdir().unwrap();
    let dir = states.path().join("big");
    let mut agent = spawn_agent(s, Some(&mint(s, &["--uses", "1"])), &dir, Some("big"));
    let agent_id = online_by_hostname(s, schemas, 1)["big"].clone();
    wait_for_table(s, schemas, &agent_id, "installed_software");
    agent.kill();
    let (mut socket, welcome) = report_connection(s, &dir);
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    let rows: Vec<Value> = (0..ROWS)
        .map(|i| {
            json!({"name": package_name(i), "version": format!("1.{i}"), "architecture": "amd64", "source": "dpkg"})
        })
        .collect();
    let report = json!({"type": "inventory", "table": "installed_software", "collected_at_ms": 2, "available": true, "rows": rows});
    socket.send(tungstenite::Message::text(report.to_string())).unwrap();
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let first =
            structured(s, schemas, "get_agent_inventory", json!({"agent_id": agent_id, "table": "installed_software"}));
        let seen = first["rows"].as_array().unwrap().len() as u64 + first["remaining"].as_u64().unwrap();
        if seen == ROWS as u64 {
            return agent_id;
        }
        assert!(std::time::Instant::now() < deadline, "the report was not stored: {seen} rows");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn package_name(i: usize) -> String {
    if i.is_multiple_of(7) { format!("pkg-{i:05}-\"é✓🙂\\") } else { format!("pkg-{i:05}") }
}

/// Pages through `tool` with `arguments` as a client would, checking each whole answer's size
/// against `budget`; every row of `field`, in order.
fn pages(s: &common::Server, tool: &str, arguments: Value, field: &str, budget: usize) -> (Vec<Value>, usize) {
    let (mut rows, mut calls, mut arguments) = (Vec::new(), 0, arguments);
    loop {
        let answer = common::call_as(s, &s.token, tool, arguments.clone());
        calls += 1;
        assert!(answer.body.len() <= budget, "{tool}: page {calls} is {} bytes, over {budget}", answer.body.len());
        let body = answer.json();
        let page = &body["result"]["structuredContent"];
        let found = page[field].as_array().unwrap_or_else(|| panic!("{tool}: {body}"));
        assert!(!found.is_empty(), "{tool}: an empty page: {body}");
        rows.extend(found.iter().cloned());
        let remaining = page["remaining"].as_u64().unwrap() as usize;
        assert_eq!(rows.len() + remaining, ROWS, "{tool}: page {calls} counts what remains");
        match page["next_cursor"].as_str() {
            Some(cursor) => arguments["cursor"] = json!(cursor),
            None => return (rows, calls),
        }
    }
}

fn names(rows: &[Value]) -> Vec<String> {
    rows.iter().map(|r| r["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn ten_thousand_inventory_rows_come_page_by_page_each_exactly_once_within_the_budget() {
    let s = common::start(FAST);
    let schemas = output_schemas(&s);
    let agent_id = ten_thousand_packages(&s, &schemas);
    let expected: Vec<String> = (0..ROWS).map(package_name).collect();
    let budget = 64 * 1024;

    // One agent's table, cut in SQL; the fleet's, with agent ids; a glob, matched row by row.
    let one = json!({"agent_id": agent_id, "table": "installed_software", "limit": 1000});
    let (rows, calls) = pages(&s, "get_agent_inventory", one, "rows", budget);
    assert_eq!(names(&rows), expected, "each row once, in order");
    assert!(calls > ROWS / 1000, "the budget, not the limit, cut the pages: {calls} pages");
    let fleet = json!({"table": "installed_software", "filters": [{"column": "name", "op": "~", "value": "pkg-*"}], "limit": 1000});
    let (rows, _) = pages(&s, "query_inventory", fleet, "rows", budget);
    assert!(rows.iter().all(|r| r["agent_id"] == agent_id.as_str()), "rows carry their agent");
    assert_eq!(names(&rows), expected, "a filter matched in Rust pages the same");
    let (rows, _) = pages(&s, "query_installed_software", json!({"name": "pkg-*", "limit": 1000}), "packages", budget);
    assert_eq!(names(&rows).into_iter().collect::<BTreeSet<_>>().len(), ROWS, "each package once");
}

#[test]
fn a_smaller_budget_makes_smaller_pages_and_a_cursor_pages_only_its_own_query() {
    let s = common::start(&[FAST, &["--page-bytes", "8192"][..]].concat());
    let schemas = output_schemas(&s);
    let agent_id = ten_thousand_packages(&s, &schemas);
    let query = json!({"agent_id": agent_id, "table": "installed_software", "limit": 1000});
    let first = common::call_as(&s, &s.token, "get_agent_inventory", query.clone());
    assert!(first.body.len() <= 8192, "{} bytes", first.body.len());
    let first = first.json()["result"]["structuredContent"].clone();
    let cursor = first["next_cursor"].as_str().unwrap().to_string();

    let refused = |arguments: Value, words: &str| {
        let answer = common::call_as(&s, &s.token, "get_agent_inventory", arguments).json();
        let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_string();
        assert!(answer["result"]["isError"] == true && text.contains(words), "{answer}");
    };
    let mut other = query.clone();
    other["columns"] = json!(["name"]);
    other["cursor"] = json!(cursor);
    refused(other, "pages another query");
    let mut both = query.clone();
    both["cursor"] = json!(cursor);
    both["offset"] = json!(5);
    refused(both, "not both");
    let mut forged = query.clone();
    forged["cursor"] = json!("not a cursor");
    refused(forged, "not one this server gave");

    // The limit may change between pages; the rows go on where the last page ended.
    let mut next = query.clone();
    next["cursor"] = json!(cursor);
    next["limit"] = json!(3);
    let second = structured(&s, &schemas, "get_agent_inventory", next);
    let shown = first["rows"].as_array().unwrap().len();
    assert_eq!(second["rows"][0]["name"], package_name(shown), "{second}");
    assert_eq!(second["remaining"], json!(ROWS - shown - 3));
}

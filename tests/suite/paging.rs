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
        // A filter matched row by row counts a while past the page: a lower bound then.
        match page["remaining_exact"] == false {
            false => assert_eq!(rows.len() + remaining, ROWS, "{tool}: page {calls} counts what remains"),
            true => assert!(rows.len() + remaining < ROWS && remaining > 0, "{tool}: page {calls}: a lower bound"),
        }
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

/// The read tools whose arrays stay small whatever the fleet's size, each with why; every
/// other read tool with an array at the root of its answer pages.
const BOUNDED: &[(&str, &str)] = &[
    ("get_kek_status", "the keyring's versions: one per rotation of the key-encryption key"),
    ("discover_permissions", "one entry per tool of the catalogue and role of policy.yaml"),
    ("get_engine_principal", "one principal's roles and credentials"),
    ("list_engine_roles", "the roles policy.yaml declares"),
    ("audit_engine_no_admin", "engine principals holding an administrator permission: a finding expected empty"),
    ("get_agent_details", "one agent's inventory tables (get_tags pages its tags: they are listed here too)"),
    ("list_inventory_tables", "the inventory tables the agent declares"),
    ("discover_scope_kinds", "the scope attributes, examples and tag keys"),
    ("get_fleet_posture_fast", "one count per operating system"),
    ("get_definition", "one definition's declared columns"),
    ("find_tools", "at most `limit` (25) matches, 5 schemas, and one entry per toolset"),
    ("enable_toolset", "one toolset's tools"),
    ("get_dex_perf_fleet", "one entry per experience metric agents measure"),
    ("list_dex_perf_devices", "at most `limit` (500) devices ranked, and as many that cannot measure the metric"),
    ("get_dex_perf_cohorts", "at most `limit` (500) cohorts, the largest first"),
    ("get_network_fleet", "one entry per network metric and network signal, and ten interfaces"),
    ("list_dex_perf_apps", "at most `limit` (500) programs, each with the package versions that own it"),
    ("get_dex_app_perf", "at most `limit` (500) devices, and one entry per version the app ran at"),
    ("get_dex_group_app_perf", "at most `limit` (500) devices, and one entry per version the app ran at"),
    ("compare_app_perf_versions", "at most 50 devices that moved between the versions (all are counted)"),
    ("get_agent_app_usage", "at most `limit` (500) programs"),
    ("list_network_devices", "at most `limit` (500) devices ranked, and as many that cannot measure the metric"),
    ("get_guardian_schemas", "the signals experience.yaml declares and the metrics agents measure"),
    ("list_dex_signals", "one entry per signal experience.yaml declares"),
    ("get_dex_signal_scope", "at most `limit` (500) devices"),
    ("get_dex_signal_detail", "at most `limit` (500) occurrences and one entry per OS"),
];

fn output_schema(meta: &toolgate_domain::catalogue::ToolMeta) -> Value {
    meta.output_schema.map(|s| serde_json::from_str(s).unwrap()).unwrap_or(Value::Null)
}

#[test]
fn every_read_tool_with_a_list_pages_unless_its_list_is_bounded() {
    use toolgate::registry::ToolId;
    for id in ToolId::ALL {
        let meta = id.meta();
        let schema = output_schema(meta);
        let properties = schema["properties"].as_object().cloned().unwrap_or_default();
        let lists = properties.values().any(|p| p["type"] == "array");
        // query_responses pages by a cursor of its own (an arrival order agents add to).
        let pages = meta.pages.is_some() || meta.name == "query_responses";
        let bounded = BOUNDED.iter().any(|(name, _)| *name == meta.name);
        if meta.class == toolgate_policy::OperationClass::Read && lists {
            assert!(pages != bounded, "{}: pages: {pages}, listed as bounded: {bounded}", meta.name);
        }
    }
}

/// Each listing tool, called as its example call shows on a real agent's server with a 1 KiB
/// page: each answer within it (or one row alone), every page followed to the last, no row
/// twice, and each page's `remaining` what the pages after it hold.
#[test]
fn every_listing_tool_pages_within_a_small_budget() {
    use toolgate::registry::ToolId;
    let s = common::start(&[FAST, &["--page-bytes", "1024"][..]].concat());
    let schemas = output_schemas(&s);
    let states = tempfile::tempdir().unwrap();
    let _agent = spawn_agent(&s, Some(&mint(&s, &["--uses", "1"])), &states.path().join("one"), Some("one"));
    let agent_id = online_by_hostname(&s, &schemas, 1)["one"].clone();
    wait_for_table(&s, &schemas, &agent_id, "installed_software");
    let mut paged = 0;
    for id in ToolId::ALL {
        let meta = id.meta();
        let Some(field) = meta.pages else { continue };
        let mut arguments: Value = meta.example_arguments.map_or(json!({}), |a| serde_json::from_str(a).unwrap());
        if arguments.get("agent_id").is_some() {
            arguments["agent_id"] = json!(agent_id);
        }
        if arguments.get("table").is_some() {
            arguments["table"] = json!("installed_software");
        }
        let (mut seen, mut pages, mut promised) = (BTreeSet::new(), 0, None::<u64>);
        loop {
            let answer = common::call_as(&s, &s.token, meta.name, arguments.clone());
            let size = answer.body.len();
            let body = answer.json();
            let page = &body["result"]["structuredContent"];
            if body["result"]["isError"] != false {
                assert_eq!(pages, 0, "{}: a later page failed: {body}", meta.name);
                break;
            }
            let rows = page[field].as_array().unwrap_or_else(|| panic!("{}: no {field}: {page}", meta.name)).clone();
            assert!(size <= 1024 || rows.len() == 1, "{}: {size} bytes for {} rows", meta.name, rows.len());
            let remaining = page["remaining"].as_u64().unwrap();
            if let Some(promised) = promised {
                assert_eq!(promised, rows.len() as u64 + remaining, "{}: page {pages}: {page}", meta.name);
            }
            for row in &rows {
                assert!(seen.insert(row.to_string()), "{}: a row twice: {row}", meta.name);
            }
            pages += 1;
            promised = Some(remaining);
            match page["next_cursor"].as_str() {
                Some(cursor) if remaining > 0 => arguments["cursor"] = json!(cursor),
                _ => break,
            }
        }
        paged += usize::from(pages > 1);
    }
    assert!(paged >= 5, "only {paged} tools had more than one page at 1 KiB");
}

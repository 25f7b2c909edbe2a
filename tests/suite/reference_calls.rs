//! Calls shaped like the reference surface's, on a real server with real agents: each is
//! answered as the same call with toolgate's own argument names (docs/differences.md), and a
//! call that gives both names with different values, or a plugin action no definition
//! publishes, is refused saying which argument and why.

use crate::common;

use common::agents::*;
use common::call_as;
use serde_json::{Value, json};

#[test]
fn reference_shaped_reads_are_answered_as_with_toolgates_names() {
    let Fleet { s, schemas, agents: _agents, ids, states: _states } = fleet_of_three(FAST);
    let read = |tool: &str, arguments: Value| structured(&s, &schemas, tool, arguments);

    assert_eq!(read("get_definition", json!({"id": "os_facts"})), read("get_definition", json!({"name": "os_facts"})));
    let questions = read("list_definitions", json!({"type": "question"}));
    assert_eq!(questions, read("list_definitions", json!({"class": "read"})));
    assert!(questions["count"].as_u64().unwrap() > 0, "{questions}");
    let actions = read("list_definitions", json!({"type": "action"}));
    assert_eq!(actions, read("list_definitions", json!({"class": "change"})));
    assert!(actions["definitions"].as_array().unwrap().iter().all(|d| d["class"] == "change"), "{actions}");

    // No kill switch is engaged: every definition runs, none is stopped.
    let all = read("list_definitions", json!({}));
    assert_eq!(read("list_definitions", json!({"enabled": true})), all);
    assert_eq!(read("list_definitions", json!({"enabled": false}))["count"], 0);

    let posture = read("get_fleet_posture_fast", json!({"ttl_seconds": 30}));
    assert_eq!(posture["online"], 3, "{posture}");

    // The reference's plugin + action run the definition that publishes them.
    let a = ids["fleet-a"].as_str();
    let started = read("execute_instruction", json!({"plugin": "host", "action": "facts", "agent_ids": [a]}));
    let execution = started["execution_id"].as_str().unwrap().to_string();
    let status = wait_finished(&s, &schemas, &s.token, &execution);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");
    let rows = read("query_responses", json!({"execution_id": execution}));
    assert_eq!(rows["definition"], "os_facts", "{rows}");
    assert_eq!(rows["rows"][0]["values"]["hostname"], "fleet-a", "{rows}");

    let by_reference = read("list_executions", json!({"definition_id": "os_facts"}));
    assert_eq!(by_reference, read("list_executions", json!({"definition": "os_facts"})));
    assert_eq!(by_reference["executions"][0]["execution_id"], execution.as_str(), "{by_reference}");
    let finished = read("list_executions", json!({"definition_id": "os_facts", "status": "finished"}));
    assert_eq!(finished, by_reference, "it finished");
    assert_eq!(read("list_executions", json!({"status": "running"}))["executions"], json!([]));

    // A bundle for one agent, its steps named by plugin and action.
    let steps = json!([{"plugin": "host", "action": "facts"}, {"plugin": "files", "action": "sha256", "params": {"path": PROBE}}]);
    let bundle = read("execute_bundle", json!({"agent_id": ids["fleet-b"], "steps": steps}));
    let bundle_id = bundle["bundle_id"].as_str().unwrap().to_string();
    let status = wait_finished(&s, &schemas, &s.token, &bundle_id);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");
    let listed = read("list_executions", json!({"definition_id": "file_hash"}));
    let ours = &listed["executions"][0];
    assert_eq!((&ours["execution_id"], &ours["definitions"]), (&json!(bundle_id), &json!(["os_facts", "file_hash"])));
    let hashes = read("query_responses", json!({"execution_id": bundle_id, "step": 1}));
    assert_eq!(hashes["rows"].as_array().unwrap().len(), 1, "{hashes}");
    assert_eq!(hashes["rows"][0]["hostname"], "fleet-b", "{hashes}");

    // The reference's instruction_id: every run of the definition, the single run on fleet-a
    // and the bundle's step 0 on fleet-b, each row saying where it came from.
    let every = read("query_responses", json!({"instruction_id": "os_facts"}));
    assert_eq!(every, read("query_responses", json!({"definition": "os_facts"})));
    let mut runs: Vec<(String, i64, String)> = every["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["execution_id"].as_str().unwrap().into(),
                r["step"].as_i64().unwrap(),
                r["hostname"].as_str().unwrap().into(),
            )
        })
        .collect();
    runs.sort();
    let mut want = vec![(execution.clone(), 0, "fleet-a".to_string()), (bundle_id.clone(), 0, "fleet-b".to_string())];
    want.sort();
    assert_eq!(runs, want, "{every}");
    let grouped = read("aggregate_responses", json!({"instruction_id": "os_facts", "group_by": "hostname"}));
    assert_eq!(grouped["execution_id"], Value::Null, "{grouped}");
    assert_eq!(grouped["groups"].as_array().unwrap().len(), 2, "{grouped}");
    // The reference's aggregate: the sum of the probe file's size, on the one run of file_hash.
    let size = "probe of fleet-b\n".len();
    let summed = json!({"instruction_id": "file_hash", "group_by": "path", "of": "size_bytes", "aggregate": "sum"});
    let summed = read("aggregate_responses", summed);
    assert_eq!((&summed["groups"][0]["sum"], &summed["aggregate"]), (&json!(size), &json!("sum")), "{summed}");
    let paged = read("query_responses", json!({"instruction_id": "os_facts", "limit": 1}));
    let rest = read("query_responses", json!({"instruction_id": "os_facts", "cursor": paged["next_cursor"]}));
    assert_eq!(rest["next_cursor"], Value::Null, "{rest}");
    let both: Vec<&Value> = paged["rows"].as_array().unwrap().iter().chain(rest["rows"].as_array().unwrap()).collect();
    assert_eq!(both, every["rows"].as_array().unwrap().iter().collect::<Vec<_>>(), "two pages, each row once");

    // The reference's bundles hold up to 32 steps; the last one's rows are read by its number.
    let many = vec![json!({"plugin": "host", "action": "facts"}); 32];
    let long = read("execute_bundle", json!({"agent_id": ids["fleet-c"], "steps": many}));
    let long_id = long["bundle_id"].as_str().unwrap().to_string();
    assert_eq!(wait_finished(&s, &schemas, &s.token, &long_id)["counts"], json!({"succeeded": 1}));
    let last = read("query_responses", json!({"execution_id": long_id, "step": 31}));
    assert_eq!(last["rows"][0]["hostname"], "fleet-c", "{last}");

    // query_inventory for one agent: only that agent's rows.
    wait_for_table(&s, &schemas, a, "installed_software");
    let one = read("query_inventory", json!({"table": "installed_software", "agent_id": a, "limit": 1000}));
    let rows = one["rows"].as_array().unwrap();
    assert!(!rows.is_empty() && rows.iter().all(|r| r["agent_id"] == a), "{one}");
    let scoped = json!({"table": "installed_software", "scope": "hostname = \"fleet-a\"", "limit": 1000});
    let by_scope = read("query_inventory", scoped);
    assert_eq!(
        (&one["rows"], &one["remaining"]),
        (&by_scope["rows"], &by_scope["remaining"]),
        "agent_id chooses what a scope of that one host does"
    );

    // query_inventory's `plugin` is the table; a name that is no table is refused naming them.
    let by_plugin = read("query_inventory", json!({"plugin": "installed_software", "agent_id": a, "limit": 1000}));
    assert_eq!((&by_plugin["rows"], &by_plugin["remaining"]), (&one["rows"], &one["remaining"]));
    let unknown = call_as(&s, &s.token, "query_inventory", json!({"plugin": "software"})).json();
    let text = unknown["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(unknown["result"]["isError"] == true && text.contains("installed_software"), "{unknown}");

    // get_agent_inventory as the reference calls it, with agent_id alone: every table the agent
    // reported, and their rows in the tables' order, each naming its table.
    let whole = read("get_agent_inventory", json!({"agent_id": a, "limit": 1000}));
    let reported: Vec<&str> =
        whole["tables"].as_array().unwrap().iter().map(|t| t["table"].as_str().unwrap()).collect();
    assert!(reported.contains(&"installed_software") && reported.contains(&"processes"), "{reported:?}");
    let rows = whole["rows"].as_array().unwrap();
    assert!(rows.iter().all(|r| reported.contains(&r["table"].as_str().unwrap())), "every row names its table");
    let software = read("get_agent_inventory", json!({"agent_id": a, "table": "installed_software", "limit": 1000}));
    let software = software["rows"].as_array().unwrap();
    let first: Vec<Value> = rows.iter().take(software.len().min(rows.len())).cloned().collect();
    let expected: Vec<Value> = software
        .iter()
        .take(first.len())
        .map(|r| {
            let mut tagged = r.clone();
            tagged["table"] = json!("installed_software");
            tagged
        })
        .collect();
    assert_eq!(first, expected, "the first table's rows first, as the table alone gives them");
    let with_filter = json!({"agent_id": a, "filters": [{"column": "name", "op": "=", "value": "bash"}]});
    let refused = call_as(&s, &s.token, "get_agent_inventory", with_filter).json();
    let text = refused["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("give `table`"), "{refused}");
    // The fleet's whole inventory, as query_inventory without a table: every row names its table.
    let fleet = read("query_inventory", json!({"limit": 50}));
    assert!(fleet["rows"].as_array().unwrap().iter().all(|r| r["table"].is_string() && r["agent_id"].is_string()));
    assert!(fleet["remaining"].as_u64().unwrap() > 0, "{fleet}");
}

#[test]
fn two_names_that_disagree_and_actions_no_definition_runs_are_refused_at_the_alias() {
    let Fleet { s, agents: _agents, ids, .. } = fleet_of_three(FAST);
    let refused = |tool: &str, arguments: Value| {
        // The gate's refusal names each argument; a handler's says what to send instead.
        let v = call_as(&s, &s.token, tool, arguments.clone()).json();
        assert_eq!(v["result"]["isError"], true, "{tool} {arguments}: {v}");
        let answer = &v["result"]["structuredContent"];
        match answer["error"].as_str() {
            Some(kind) => {
                assert_eq!(kind, "invalid_arguments", "{v}");
                answer["errors"].to_string()
            }
            None => v["result"]["content"][0]["text"].to_string(),
        }
    };
    let both = refused("get_definition", json!({"id": "os_facts", "name": "disk_usage"}));
    assert!(both.contains("/id") && both.contains("different values"), "{both}");
    // The same value under both names is one argument, not a conflict.
    let same = call_as(&s, &s.token, "get_definition", json!({"id": "os_facts", "name": "os_facts"})).json();
    assert_eq!(same["result"]["structuredContent"]["name"], "os_facts", "{same}");

    let a = ids["fleet-a"].as_str();
    let unknown = refused("execute_instruction", json!({"plugin": "host", "action": "factz", "agent_ids": [a]}));
    assert!(unknown.contains("has no action `factz`") && unknown.contains("facts"), "{unknown}");
    let half = refused("execute_instruction", json!({"plugin": "host", "agent_ids": [a]}));
    assert!(half.contains("give both"), "{half}");
    let unmeasured = refused(
        "aggregate_responses",
        json!({"instruction_id": "os_facts", "group_by": "hostname", "aggregate": "avg"}),
    );
    assert!(unmeasured.contains("name it as `of`"), "{unmeasured}");
    let neither = refused("query_responses", json!({"limit": 5}));
    assert!(neither.contains("instruction_id"), "{neither}");
    let other = refused("query_responses", json!({"execution_id": "exe-0000000000000000", "definition": "os_facts"}));
    assert!(other.contains("no execution"), "{other}");
    let mapped = refused("list_definitions", json!({"type": "sensor"}));
    assert!(mapped.contains("question, action") || mapped.contains("action, question"), "{mapped}");
    let targets = refused(
        "execute_bundle",
        json!({"agent_id": a, "agent_ids": [ids["fleet-b"]], "steps": [{"definition": "os_facts"}]}),
    );
    assert!(targets.contains("/agent_id") && targets.contains("different values"), "{targets}");
    let step = refused(
        "execute_bundle",
        json!({"agent_id": a, "steps": [{"plugin": "host", "action": "facts", "definition": "disk_usage"}]}),
    );
    assert!(step.contains("/steps/0/plugin"), "{step}");
    // Nothing was started by any of them.
    let listed = common::agents::structured(&s, &common::agents::output_schemas(&s), "list_executions", json!({}));
    assert_eq!(listed["executions"], json!([]), "{listed}");
}

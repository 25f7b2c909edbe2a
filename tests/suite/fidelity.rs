//! Fidelity: what the served surface promises, held to the seeds and the reference, one test
//! per finding of the review (issue "Fidelity"), against the real binary.

use crate::common;

use common::{call_as, start};
use serde_json::json;

/// The seeds: `query_audit_log` refuses an `until` of 0 or less (it would match nothing, and
/// says nothing about why); an `until` of 1 and more is taken.
#[test]
fn query_audit_log_refuses_an_until_of_zero_or_less() {
    let s = start(&[]);
    for until in [0, -5] {
        let refused = call_as(&s, &s.token, "query_audit_log", json!({"until": until})).json();
        let text = refused.to_string();
        assert!(
            text.contains("until") && (refused.get("error").is_some() || refused["result"]["isError"] == true),
            "{refused}"
        );
    }
    let taken = call_as(&s, &s.token, "query_audit_log", json!({"until": 1})).json();
    assert_eq!(taken["result"]["isError"], false, "{taken}");
}

/// Retry-safe dispatch: a changing instruction retried with its idempotency key (a client
/// whose connection dropped) answers the first execution and never runs twice on the agent;
/// other arguments under the same key are refused; another principal's key is its own.
#[test]
fn a_retried_execution_with_its_key_runs_once() {
    use common::agents::*;
    let Fleet { s, schemas, states, agents: _agents, ids } = fleet_of_three(FAST);
    let arguments = json!({"definition": "append_line", "params": {"file": "once.txt", "line": "ran"},
                           "agent_ids": [ids["fleet-a"]], "idempotency_key": "deploy-42"});
    let first = structured(&s, &schemas, "execute_instruction", arguments.clone());
    wait_finished(&s, &schemas, &s.token, first["execution_id"].as_str().unwrap());
    let again = structured(&s, &schemas, "execute_instruction", arguments.clone());
    assert_eq!(again["execution_id"], first["execution_id"], "{again}");
    assert_eq!((again["replayed"].clone(), again["delivered_now"].clone()), (json!(true), json!(0)));
    let text = std::fs::read_to_string(states.path().join("fleet-a/work/once.txt")).unwrap();
    assert_eq!(text, "ran\n", "the change ran once");

    let mut other = arguments.clone();
    other["params"]["line"] = json!("something else");
    let refused = call_as(&s, &s.token, "execute_instruction", other);
    assert!(refusal(&refused).contains("idempotency_key `deploy-42` belongs to execution"), "{refused:?}");
    s.cli(&["principal", "add", "olga", "--role", "Operator"]);
    let olga = s.token("olga", "operator", "1h");
    let hers = structured_as(&s, &schemas, &olga, "execute_instruction", arguments);
    assert_ne!(hers["execution_id"], first["execution_id"], "a key is the principal's own");
}

/// Session rows carry a target type (the seeds' `target_type = McpSession`): the kinds a
/// reader may filter `query_audit_log` by are exactly the kinds rows are written with.
#[test]
fn the_audit_target_types_offered_are_the_ones_written() {
    use toolgate_domain::audit::TargetType;
    let s = start(&[]);
    let listed = s.post(&[("X-MCP-Toolsets", "oversight")], r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).json();
    let tool = listed["result"]["tools"].as_array().unwrap().iter().find(|t| t["name"] == "query_audit_log").unwrap();
    let offered = &tool["inputSchema"]["properties"]["target_type"]["enum"];
    let written: Vec<&str> = TargetType::ALL.iter().map(|t| t.label()).collect();
    assert_eq!(offered, &json!(written));
    let refused = call_as(&s, &s.token, "query_audit_log", json!({"target_type": "Nonsense"})).json();
    assert!(refused.get("error").is_some() || refused["result"]["isError"] == true, "{refused}");
}

/// The benchmarks build from `scripts/gen_catalogue.py`'s catalogues: one that stopped
/// checking (a policy.yaml field it does not write) breaks every figure unseen.
#[test]
fn the_benchmarks_generated_catalogue_checks_clean() {
    let dir = tempfile::tempdir().unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let made = std::process::Command::new("python3")
        .args([&format!("{root}/scripts/gen_catalogue.py"), "12", dir.path().to_str().unwrap()])
        .output()
        .expect("python3 runs");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let (tools, policy) = (dir.path().join("tools.yaml"), dir.path().join("policy.yaml"));
    let checked = std::process::Command::new(common::bin())
        .args(["check", "--tools", tools.to_str().unwrap(), "--policy", policy.to_str().unwrap()])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&checked.stdout).into_owned() + &String::from_utf8_lossy(&checked.stderr);
    assert!(checked.status.success() && said.contains(" 0 errors"), "{said}");
}

/// `toolgate check` finds the handlers again (issue 48): a catalogue naming a function that is
/// not there fails `check` at the entry's `handler` line, with the closest function, as the
/// build does; the project's own catalogue checks clean with its handlers read.
#[test]
fn toolgate_check_refuses_a_handler_that_is_not_there() {
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = tempfile::tempdir().unwrap();
    let handlers = dir.path().join("src/handlers");
    std::fs::create_dir_all(&handlers).unwrap();
    for file in ["plugin_config.rs", "mod.rs"] {
        std::fs::copy(format!("{root}/src/handlers/{file}"), handlers.join(file)).unwrap();
    }
    let tools = std::fs::read_to_string(format!("{root}/tools.yaml")).unwrap();
    let wrong = "plugin_config::delete_plugin_config_nowhere";
    let edited = tools.replacen("handler: plugin_config::delete_plugin_config\n", &format!("handler: {wrong}\n"), 1);
    assert_ne!(edited, tools, "tools.yaml names plugin_config::delete_plugin_config");
    let line = edited.lines().position(|l| l.ends_with(wrong)).unwrap() + 1;
    std::fs::write(dir.path().join("tools.yaml"), edited).unwrap();
    std::fs::copy(format!("{root}/policy.yaml"), dir.path().join("policy.yaml")).unwrap();
    let check = |tools: &str, policy: &str| {
        let out =
            std::process::Command::new(common::bin()).args(["check", "--tools", tools, "--policy", policy]).output();
        let out = out.unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (ok, said) =
        check(dir.path().join("tools.yaml").to_str().unwrap(), dir.path().join("policy.yaml").to_str().unwrap());
    assert!(!ok, "{said}");
    let expected =
        format!("handler `{wrong}` not found in src/handlers/plugin_config.rs; did you mean `delete_plugin_config`?");
    assert!(said.contains(&expected), "{said}");
    assert!(said.contains(&format!("tools.yaml:{line}:5")), "line {line}: {said}");
    let (ok, said) = check(&format!("{root}/tools.yaml"), &format!("{root}/policy.yaml"));
    assert!(ok && said.contains(" 0 errors") && !said.contains("handlers not checked"), "{said}");
}

//! Cross-checks between what the generator decided and what the runtime does. The per-tool
//! tests are generated (OUT_DIR/crosscheck_tests.rs); the helpers they call are here.

use serde_json::Value;
use toolgate::registry::{self, CATALOGUE, MATRIX, TOOLS_LIST_ALL, TOOLS_LIST_BY_TIER, Tier, ToolId};
use toolgate_policy::{Decision, OperationClass};

mod crosscheck {
    use super::*;

    fn served(name: &str) -> Value {
        let all: Vec<Value> = serde_json::from_str(TOOLS_LIST_ALL).expect("the served tools/list is JSON");
        all.into_iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("{name} is not served"))
    }

    /// The hint invariants, checked on the runtime's tables and on the served bytes.
    pub fn hints_follow_class(id: ToolId) {
        let m = id.meta();
        let a = m.annotations;
        let waived = |hint: &str| m.hint_override.is_some_and(|o| o.hint == hint);
        assert_eq!(a.read_only, m.class == OperationClass::Read, "{}: readOnlyHint must equal 'class is read'", m.name);
        if a.read_only {
            assert!(!a.destructive, "{}: read-only yet destructive", m.name);
            assert!(a.idempotent || waived("idempotentHint"), "{}: read-only yet not idempotent", m.name);
        }
        if matches!(m.class, OperationClass::Delete | OperationClass::Execute) {
            assert!(
                a.destructive || waived("destructiveHint"),
                "{}: {}-class yet not destructive",
                m.name,
                m.class.label()
            );
        }
        let hints = &served(m.name)["annotations"];
        assert_eq!(hints["readOnlyHint"], a.read_only, "{}", m.name);
        assert_eq!(hints["destructiveHint"], a.destructive, "{}", m.name);
        assert_eq!(hints["idempotentHint"], a.idempotent, "{}", m.name);
        assert_eq!(hints["openWorldHint"], a.open_world, "{}", m.name);
    }

    /// The runtime's own evaluation of the tier rules equals the build-time matrix.
    pub fn decisions_match(id: ToolId, expected: &[Decision]) {
        let m = id.meta();
        for t in Tier::ALL {
            let want = expected[t.index()];
            assert_eq!(MATRIX[id.index()][t.index()], want, "{} at {}: matrix", m.name, t.name());
            assert_eq!(CATALOGUE.decision(m, Some(t.rules())), want, "{} at {}: lookup", m.name, t.name());
            assert_eq!(t.rules().decide(m.securable, m.operation), want, "{} at {}: rules", m.name, t.name());
        }
        assert_eq!(CATALOGUE.decision(m, None), Decision::Deny, "{}: an unknown tier must deny", m.name);
        assert_eq!(m.approval_gated, expected.contains(&Decision::ApprovalRequired), "{}: approval_gated", m.name);
    }
}

include!(concat!(env!("OUT_DIR"), "/crosscheck_tests.rs"));

/// The served bytes parse and say exactly what tools.yaml says, tier by tier.
#[test]
fn served_tools_match_the_yaml() {
    let source = toolgate_catalogue::SourceFile::new("tools.yaml", registry::TOOLS_YAML);
    let mut yaml = toolgate_catalogue::load::parse_catalogue(&source).expect("the embedded tools.yaml parses").model;
    // What `pages` derives is served as the build derives it, like approval_id below.
    toolgate_catalogue::check::pages::expand(&mut yaml.tools);
    assert_eq!(yaml.tools.len(), ToolId::ALL.len());
    for t in Tier::ALL {
        let served: Vec<Value> = serde_json::from_str(TOOLS_LIST_BY_TIER[t.index()]).expect("JSON");
        let expected_names: Vec<&str> = ToolId::ALL
            .iter()
            .filter(|id| MATRIX[id.index()][t.index()] != Decision::Deny)
            .map(|id| id.meta().name)
            .collect();
        let served_names: Vec<&str> = served.iter().map(|s| s["name"].as_str().unwrap()).collect();
        assert_eq!(served_names, expected_names, "tier {}: Deny tools hidden, YAML order kept", t.name());
        for s in &served {
            let tool = yaml.tools.iter().find(|y| s["name"] == y.name.as_str()).unwrap();
            let id = ToolId::from_name(&tool.name).unwrap();
            assert_eq!(s["title"], tool.title);
            assert_eq!(s["description"], tool.description);
            let mut expected_input = Value::Object(tool.input_schema.clone());
            let mut served_input = s["inputSchema"].clone();
            if id.meta().approval_gated {
                // The generator adds approval_id to gated tools; everything else is verbatim.
                let added = served_input
                    .get_mut("properties")
                    .and_then(Value::as_object_mut)
                    .and_then(|p| p.remove("approval_id"));
                assert!(added.is_some(), "{}: a gated tool publishes approval_id", tool.name);
                if expected_input.get("properties").is_none() {
                    expected_input["properties"] = serde_json::json!({});
                }
            }
            assert_eq!(served_input, expected_input, "{}: inputSchema served verbatim", tool.name);
            assert_eq!(s.get("outputSchema").cloned(), tool.output_schema.clone().map(Value::Object), "{}", tool.name);
            assert_eq!(serde_json::from_str::<Value>(id.meta().input_schema).unwrap(), s["inputSchema"]);
        }
    }
}

#[test]
fn names_resolve_exactly() {
    for id in ToolId::ALL {
        assert_eq!(ToolId::from_name(id.meta().name), Some(id));
        assert_eq!(ToolId::from_name(&id.meta().name.to_uppercase()).filter(|x| *x != id), None);
    }
    assert_eq!(ToolId::from_name(""), None);
    assert_eq!(ToolId::from_name("no_such_tool"), None);
    assert_eq!(Tier::from_name("root"), None);
}

/// The server compiles a tool's validators on its first call; the build's check promised they
/// compile. Every shipped schema compiles as the server compiles it.
#[test]
fn every_schema_compiles_as_the_server_compiles_it() {
    let schemas = toolgate_gate::Schemas::compile(&CATALOGUE).expect("every schema parses");
    schemas.compile_all().expect("every schema compiles with the server's options");
}

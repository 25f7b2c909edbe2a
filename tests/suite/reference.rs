//! Every served tool that the reference surface names (tests/reference/tool-surface.json, a copy
//! kept in the project) keeps that surface's RBAC pair and four hints: a client written for the
//! reference server reads the same promises here.

use serde_json::Value;
use toolgate::registry::ToolId;

#[test]
fn tools_the_reference_names_keep_its_pair_and_hints() {
    let text = include_str!("../reference/tool-surface.json");
    let reference: Vec<Value> = serde_json::from_str(text).expect("the reference copy is JSON");
    let mut compared = 0;
    let mut differences = Vec::new();
    for entry in &reference {
        let name = entry["name"].as_str().expect("every entry has a name");
        let Some(tool) = ToolId::from_name(name) else { continue };
        compared += 1;
        let m = tool.meta();
        let ours = [
            ("securable", Value::from(m.securable)),
            ("operation", Value::from(m.operation)),
            ("readOnlyHint", Value::from(m.annotations.read_only)),
            ("destructiveHint", Value::from(m.annotations.destructive)),
            ("idempotentHint", Value::from(m.annotations.idempotent)),
            ("openWorldHint", Value::from(m.annotations.open_world)),
        ];
        for (field, value) in ours {
            let theirs = match field {
                "securable" | "operation" => &entry[field],
                hint => &entry["annotations"][hint],
            };
            if *theirs != value {
                differences.push(format!("{name}: {field} is {value} here, {theirs} in the reference"));
            }
        }
    }
    assert!(compared >= 40, "only {compared} served tools are named by the reference: is the copy whole?");
    assert!(differences.is_empty(), "{} difference(s):\n{}", differences.len(), differences.join("\n"));
}

//! What reviewers read in a pull request: tools/list per tier, each tool on its own (so one
//! YAML edit is one small diff), the policy matrix and the editor schemas, as insta snapshots
//! in snapshots/. Committed copies (docs/policy-matrix.md,
//! schemas/*.json) must equal what the generator makes; `TOOLGATE_BLESS=1 cargo test`
//! rewrites them after an intended change (then review the diff, as with `cargo insta review`).

use std::path::Path;

use serde_json::Value;
use toolgate::registry::{
    POLICY_MATRIX_MD, TOOLS_LIST_ALL, TOOLS_LIST_BY_TIER, TOOLS_LIST_DEFAULT_BY_TIER, TOOLS_LIST_DYNAMIC_BY_TIER, Tier,
    ToolId,
};

fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots"));
    s.set_prepend_module_to_snapshot(false);
    s.set_omit_expression(true);
    s
}

fn pretty(tools_array: &str) -> String {
    let tools: Value = serde_json::from_str(tools_array).expect("served bytes are JSON");
    serde_json::to_string_pretty(&serde_json::json!({ "tools": tools })).unwrap()
}

/// The committed file equals `generated`, or is rewritten under TOOLGATE_BLESS.
fn committed_equals(relative: &str, generated: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    let ensured = toolgate_catalogue::bless::ensure_file_contents(&path, generated, "cargo test --test snapshots");
    ensured.unwrap_or_else(|stale| panic!("{stale}"));
}

#[test]
fn tools_list_per_tier() {
    settings().bind(|| {
        for tier in Tier::ALL {
            insta::assert_snapshot!(format!("tools_list__{}", tier.name()), pretty(TOOLS_LIST_BY_TIER[tier.index()]));
        }
        insta::assert_snapshot!("tools_list__all", pretty(TOOLS_LIST_ALL));
    });
}

/// What each tier is shown when it chooses nothing, and with `dynamic` (docs/toolsets.md),
/// within issue 48's targets: a default list of at most 24 KiB, a dynamic one of at most 8 KiB,
/// and a whole list no larger per tool than before toolsets (1,723 bytes, 94 tools in 161,962).
#[test]
fn tools_list_chosen_per_tier_and_within_their_budgets() {
    settings().bind(|| {
        for tier in Tier::ALL {
            let (default, dynamic) =
                (TOOLS_LIST_DEFAULT_BY_TIER[tier.index()], TOOLS_LIST_DYNAMIC_BY_TIER[tier.index()]);
            insta::assert_snapshot!(format!("tools_list__{}__default", tier.name()), pretty(default));
            insta::assert_snapshot!(format!("tools_list__{}__dynamic", tier.name()), pretty(dynamic));
            assert!(default.len() <= 24 * 1024, "{}: the default list is {} bytes", tier.name(), default.len());
            assert!(dynamic.len() <= 8 * 1024, "{}: the dynamic list is {} bytes", tier.name(), dynamic.len());
        }
    });
    let per_tool = TOOLS_LIST_ALL.len() / ToolId::ALL.len();
    assert!(per_tool <= 1723, "the whole list is {} bytes, {per_tool} per tool", TOOLS_LIST_ALL.len());
}

#[test]
fn policy_matrix() {
    settings().bind(|| insta::assert_snapshot!("policy_matrix", POLICY_MATRIX_MD));
    committed_equals("docs/policy-matrix.md", POLICY_MATRIX_MD);
}

/// The inventory tables agents report, as declared next to their collectors.
#[test]
fn inventory_tables() {
    committed_equals("docs/inventory.md", &toolgate_domain::fleet::inventory::markdown());
}

/// Replaces the block of `path` between `<!-- generated: NAME` and `<!-- end: NAME -->` with
/// `content`, or checks that it already is.
fn generated_block(path: &str, name: &str, content: &str) {
    let (begin, end) = (format!("<!-- generated: {name}"), format!("<!-- end: {name} -->"));
    let committed = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap();
    let start =
        committed.find(&begin).and_then(|i| committed[i..].find('\n').map(|n| i + n + 1)).expect("begin marker");
    let stop = committed.find(&end).expect("end marker");
    committed_equals(path, &format!("{}{content}{}", &committed[..start], &committed[stop..]));
}

/// The scope attributes table in docs/scope.md, between its markers, is the parser's own.
#[test]
fn scope_attributes_in_the_docs() {
    generated_block("docs/scope.md", "scope attributes", &toolgate_domain::fleet::scope::attributes_markdown());
}

/// docs/experience.md's table of metrics is the one agents sample.
#[test]
fn experience_metrics_in_the_docs() {
    generated_block("docs/experience.md", "metrics", &toolgate_domain::fleet::experience::metrics_markdown());
    generated_block("docs/experience.md", "part metrics", &toolgate_domain::fleet::parts::parts_markdown());
}

/// docs/instructions.md's reference tables are the checked definitions and manifests.
#[test]
fn instruction_tables_in_the_docs() {
    generated_block("docs/instructions.md", "instructions", &toolgate::registry::INSTRUCTIONS.markdown());
}

/// docs/differences.md's list of the reference's argument names is the catalogue's aliases.
#[test]
fn aliases_in_the_docs() {
    let tools = ToolId::ALL.iter().map(|id| (id.meta().name, id.meta().aliases));
    generated_block("docs/differences.md", "aliases", &toolgate_domain::aliases::markdown(tools));
}

/// docs/clients.md's snippets are the ones the server prints and the suite runs.
#[test]
fn client_snippets_in_the_docs() {
    for (name, language, snippet) in toolgate::clients::documented() {
        generated_block("docs/clients.md", &format!("client {name}"), &format!("```{language}\n{snippet}\n```\n"));
    }
}

#[test]
fn editor_schemas() {
    for (name, schema) in toolgate_catalogue::editor_schemas() {
        settings().bind(|| insta::assert_snapshot!(name.trim_end_matches(".json").replace('.', "_"), &schema));
        committed_equals(&format!("schemas/{name}"), &schema);
    }
}

/// snapshots/tools/<name>.snap: one tool as served, with its permission, class, handler and
/// the decision at every tier. A tool removed from tools.yaml must take its snapshot along.
#[test]
fn each_tool() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots/tools");
    let served: Vec<Value> = serde_json::from_str(TOOLS_LIST_ALL).expect("served bytes are JSON");
    let mut settings = settings();
    settings.set_snapshot_path(&dir);
    for id in ToolId::ALL {
        let meta = id.meta();
        let definition = served.iter().find(|t| t["name"] == meta.name).expect("every tool is served");
        let decisions: serde_json::Map<String, Value> =
            Tier::ALL.iter().map(|t| (t.name().to_string(), meta.decisions[t.index()].label().into())).collect();
        let mut doc = serde_json::json!({
            "permission": meta.pair(),
            "class": meta.class.label(),
            "handler": meta.handler,
            "decisions": decisions,
            "served": definition,
        });
        // A deciding check other than the permission one is part of what a reviewer reads.
        if !meta.authorization.is_permission() {
            doc["decided_by"] = meta.authorization.explained().into();
        }
        // Other names a client may call with are part of what it may do.
        if !meta.aliases.is_empty() {
            doc["aliases"] = meta.aliases.iter().map(|a| a.explained()).collect::<Vec<_>>().into();
        }
        if let Some(precondition) = meta.precondition {
            doc["precondition"] = format!("{}: {}", precondition.key(), precondition.explained()).into();
        }
        settings.bind(|| insta::assert_snapshot!(meta.name, serde_json::to_string_pretty(&doc).unwrap()));
    }
    let orphans: Vec<String> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_else(|_| Vec::new())
        .into_iter()
        .filter(|f: &String| f.ends_with(".snap"))
        .filter(|f| ToolId::from_name(f.trim_end_matches(".snap")).is_none())
        .collect();
    assert!(orphans.is_empty(), "snapshots of tools that no longer exist: {orphans:?} (delete them)");
}

/// snapshots/prompts/<name>.snap: one prompt as listed, its permission and decisions, and its
/// messages rendered with an example value for each argument (what the model would read).
#[test]
fn each_prompt() {
    use toolgate::prompts_resources::render;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots/prompts");
    let surface = toolgate::prompts_resources::PromptsResources::load(&toolgate::registry::CATALOGUE);
    let mut settings = settings();
    settings.set_snapshot_path(&dir);
    for prompt in &surface.prompts {
        // An example for each free-text argument; enums and integers take their defaults.
        let example: serde_json::Map<String, Value> = prompt
            .spec
            .arguments
            .iter()
            .filter(|a| {
                a.schema.get("type").and_then(Value::as_str) == Some("string") && !a.schema.contains_key("enum")
            })
            .map(|a| (a.name.clone(), format!("example {}", a.name).into()))
            .collect();
        let values = render::check_arguments(&prompt.spec, &example).expect("examples are valid");
        let messages: Vec<Value> = render::render(&prompt.spec, &values, &serde_json::Map::new())
            .into_iter()
            .map(|m| {
                let content = match m.content {
                    render::Content::Text(text) => serde_json::json!({"text": text.lines().collect::<Vec<_>>()}),
                    render::Content::Image { mime_type, .. } => serde_json::json!({"image": mime_type}),
                    render::Content::Resource { uri } => serde_json::json!({"resource": uri}),
                };
                serde_json::json!({"role": format!("{:?}", m.role).to_lowercase(), "content": content})
            })
            .collect();
        let decisions: serde_json::Map<String, Value> =
            Tier::ALL.iter().map(|t| (t.name().to_string(), prompt.meta.decisions[t.index()].label().into())).collect();
        let listed = surface.prompts_json(None);
        assert!(listed.is_empty(), "an undeclared tier is shown no prompt");
        let doc = serde_json::json!({
            "permission": prompt.meta.pair(),
            "decisions": decisions,
            "arguments": prompt.spec.arguments.iter().map(|a| serde_json::json!({"name": a.name, "required": a.required, "schema": a.schema})).collect::<Vec<_>>(),
            "description": prompt.spec.description,
            "rendered_with_examples": messages,
        });
        settings
            .bind(|| insta::assert_snapshot!(prompt.spec.name.as_str(), serde_json::to_string_pretty(&doc).unwrap()));
    }
    let orphans: Vec<String> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_else(|_| Vec::new())
        .into_iter()
        .filter(|f: &String| f.ends_with(".snap"))
        .filter(|f| surface.prompt(f.trim_end_matches(".snap")).is_none())
        .collect();
    assert!(orphans.is_empty(), "snapshots of prompts that no longer exist: {orphans:?} (delete them)");
}

/// snapshots/resources.snap: every fixed resource and template with its permission and the
/// decision at every tier.
#[test]
fn resources() {
    let surface = toolgate::prompts_resources::PromptsResources::load(&toolgate::registry::CATALOGUE);
    let decisions = |meta: &toolgate_domain::catalogue::PromptResourceMeta| -> serde_json::Map<String, Value> {
        Tier::ALL.iter().map(|t| (t.name().to_string(), meta.decisions[t.index()].label().into())).collect()
    };
    let fixed: Vec<Value> = surface
        .resources
        .iter()
        .map(|r| serde_json::json!({"uri": r.spec.uri, "permission": r.meta.pair(), "decisions": decisions(r.meta), "mimeType": r.spec.mime_type}))
        .collect();
    let templates: Vec<Value> = surface
        .templates
        .iter()
        .map(|t| serde_json::json!({"uriTemplate": t.spec.uri_template, "permission": t.meta.pair(), "through_tool": t.spec.tool,
                                    "decisions": decisions(t.meta), "mimeType": t.spec.mime_type, "listed_from": t.spec.list}))
        .collect();
    let doc = serde_json::json!({"resources": fixed, "resourceTemplates": templates});
    settings().bind(|| insta::assert_snapshot!("resources", serde_json::to_string_pretty(&doc).unwrap()));
}

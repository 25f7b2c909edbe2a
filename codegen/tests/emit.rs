//! The emitters: deterministic, and what they emit is valid Rust and JSON.

use toolgate_codegen::bless::ensure_file_contents;
use toolgate_codegen::{Inputs, SourceFile, SourcePaths, check, emit};

fn inputs() -> Inputs {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let read = |p: &str| SourceFile::new(p, std::fs::read_to_string(root.join(p)).unwrap());
    Inputs { tools: read("ok-clean/tools.yaml"), policy: read("policy.yaml"), handlers_dir: None }
}

fn paths() -> SourcePaths {
    SourcePaths {
        tools: "/x/tools.yaml".into(),
        policy: "/x/policy.yaml".into(),
        handlers_dir: "/x/src/handlers".into(),
    }
}

#[test]
fn same_inputs_same_bytes() {
    let first = emit::all(&check(&inputs()).unwrap(), &paths());
    let second = emit::all(&check(&inputs()).unwrap(), &paths());
    assert_eq!(first, second);
    let names: Vec<&str> = first.iter().map(|f| f.name.as_str()).collect();
    for expected in
        ["registry.rs", "args.rs", "dispatch.rs", "crosscheck_tests.rs", "policy-matrix.md", "tools_list.all.json"]
    {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
}

#[test]
fn tiers_see_only_what_they_may_call() {
    let checked = check(&inputs()).unwrap();
    let per_tier = emit::tools_list::per_tier(&checked);
    let names = |tier: &str| -> Vec<String> {
        let (_, json) = per_tier.iter().find(|(t, _)| t == tier).unwrap();
        let tools: Vec<serde_json::Value> = serde_json::from_str(json).unwrap();
        tools.iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(names("readonly"), ["get_thing"]);
    assert_eq!(names("supervised"), ["get_thing", "run_thing"]);
}

#[test]
fn generated_args_follow_the_schema() {
    let checked = check(&inputs()).unwrap();
    let args = emit::all(&checked, &paths()).into_iter().find(|f| f.name == "args.rs").unwrap();
    assert!(args.contents.contains("pub struct GetThing"), "{}", args.contents);
    assert!(args.contents.contains("pub id: String"), "a required string is a String: {}", args.contents);
}

/// What the generator emits for a fixture with every kind of tool, file by file, equals the
/// committed copy in tests/expected/emit-sample/: a change to an emitter shows up as a diff
/// a reviewer reads. `TOOLGATE_BLESS=1 cargo test -p toolgate-codegen --test emit` rewrites
/// them. (The conformance catalogue is compiled by scripts/test_clients.sh, so generated code
/// from a fixture catalogue is also built, not only read.)
#[test]
fn generated_code_matches_the_committed_copy() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let case = root.join("fixtures/emit-sample");
    let read = |p: &str| SourceFile::new(p, std::fs::read_to_string(case.join(p)).unwrap());
    let inputs =
        Inputs { tools: read("tools.yaml"), policy: read("policy.yaml"), handlers_dir: Some(case.join("handlers")) };
    let checked = check(&inputs).unwrap_or_else(|d| panic!("the sample checks clean: {d:?}"));
    let expected_dir = root.join("expected/emit-sample");
    let command = "cargo test -p toolgate-codegen --test emit";
    let stale: Vec<String> = emit::all(&checked, &paths())
        .iter()
        .filter_map(|file| ensure_file_contents(&expected_dir.join(&file.name), &file.contents, command).err())
        .collect();
    assert!(stale.is_empty(), "the generated code differs from tests/expected/emit-sample/:\n{}", stale.join("\n"));
}

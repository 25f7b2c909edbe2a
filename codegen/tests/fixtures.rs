//! Every rule's exact messages, pinned. Each folder under fixtures/ holds a tools.yaml (and
//! maybe a policy.yaml, else fixtures/policy.yaml, and a handlers/ folder) and expected.txt: the diagnostics, one a
//! line, as the build prints them. `TOOLGATE_BLESS=1 cargo test -p toolgate-codegen` rewrites
//! expected.txt after an intended change: review the diff.

use std::path::{Path, PathBuf};

use toolgate_codegen::bless::ensure_file_contents;
use toolgate_codegen::{Inputs, SourceFile, check};

fn run(case: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let read = |path: PathBuf, name: &str| SourceFile::new(name, std::fs::read_to_string(path).unwrap());
    let policy_path =
        if case.join("policy.yaml").exists() { case.join("policy.yaml") } else { root.join("policy.yaml") };
    let inputs = Inputs {
        tools: read(case.join("tools.yaml"), "tools.yaml"),
        policy: read(policy_path, "policy.yaml"),
        // Only the handler fixtures look at Rust files; the others use builtins.
        handlers_dir: Some(case.join("handlers")).filter(|d| d.is_dir()),
    };
    let diagnostics = match check(&inputs) {
        Ok(checked) => checked.warnings,
        Err(all) => all,
    };
    diagnostics.iter().map(|d| d.one_line() + "\n").collect()
}

#[test]
fn fixtures() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("tools.yaml").exists())
        .collect();
    cases.sort();
    assert!(cases.len() >= 10, "fixtures went missing: {cases:?}");
    let mut failures = Vec::new();
    for case in &cases {
        let actual = run(case);
        let expected_path = case.join("expected.txt");
        let command = "cargo test -p toolgate-codegen --test fixtures";
        if let Err(stale) = ensure_file_contents(&expected_path, &actual, command) {
            let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
            failures.push(format!("--- {stale}\nexpected:\n{expected}\nactual:\n{actual}"));
        }
        let name = case.file_name().unwrap().to_string_lossy();
        if name.starts_with("rule") {
            assert!(actual.contains("tools.yaml:") || actual.contains("policy.yaml:"), "{name} pins no diagnostic");
        }
    }
    assert!(failures.is_empty(), "{} fixture(s) differ:\n{}", failures.len(), failures.join("\n"));
}

/// `toolgate check` finds handlers by a scan, the build with syn: every fixture's handler
/// errors are the same, word for word and position for position.
#[test]
fn the_scan_of_toolgate_check_reports_what_the_build_reports() {
    use toolgate_catalogue::check::handler_scan::scanned_handlers;
    use toolgate_catalogue::check::handlers::RustHandlers;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut compared = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let case = entry.unwrap().path();
        if !case.join("handlers").is_dir() {
            continue;
        }
        let build: Vec<String> = run(&case).lines().filter(|l| l.contains(": error: ")).map(str::to_string).collect();
        let read = |path: PathBuf, name: &str| SourceFile::new(name, std::fs::read_to_string(path).unwrap());
        let policy_path =
            if case.join("policy.yaml").exists() { case.join("policy.yaml") } else { root.join("policy.yaml") };
        let files = toolgate_catalogue::Inputs {
            tools: read(case.join("tools.yaml"), "tools.yaml"),
            policy: read(policy_path, "policy.yaml"),
        };
        let scanned = scanned_handlers(&case.join("handlers"));
        let diagnostics = match toolgate_catalogue::check(&files, Some(&scanned as &dyn RustHandlers)) {
            Ok(checked) => checked.warnings,
            Err(all) => all,
        };
        let scan: Vec<String> = diagnostics.iter().filter(|d| d.is_error()).map(|d| d.one_line()).collect();
        assert_eq!(scan, build, "{}", case.display());
        compared += usize::from(!build.is_empty());
    }
    assert!(compared >= 1, "no fixture with handlers pins a handler error");
}

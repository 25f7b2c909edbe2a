//! The instruction rules, one broken definition (or manifest, or compliance file) at a time:
//! each is refused with its message at its `file:line:col`, and the good set passes.

use toolgate_codegen::SourceFile;
use toolgate_codegen::instructions::{InstructionInputs, check, check_compliance};

const MANIFEST: &str = "\
plugin: files
description: Files.
actions:
  - name: sha256
    description: Hash.
    class: read
    params:
      - {name: path, type: string, required: true, description: A path.}
    columns:
      - {name: sha256, type: text, description: The hash.}
  - name: append
    description: Append.
    class: change
    params:
      - {name: line, type: string, required: true, description: The line.}
    columns:
      - {name: count, type: integer, description: Lines.}
    plan:
      - {name: count_after, type: integer, description: Lines it would hold.}
    secrets:
      - {name: token, description: The service's token.}
";

const GOOD: &str = "\
definitions:
  - name: file_hash
    description: Hash a file.
    plugin: files
    action: sha256
    class: read
    parameters:
      type: object
      properties:
        path: {type: string}
      required: [path]
      additionalProperties: false
    timeout_ms: 1000
    diagnostic: true
";

fn run(definitions: &str) -> Vec<String> {
    run_with(MANIFEST, definitions)
}

fn run_with(manifest: &str, definitions: &str) -> Vec<String> {
    let inputs = InstructionInputs {
        manifests: vec![SourceFile::new("plugins/files.yaml", manifest)],
        definitions: SourceFile::new("instructions.yaml", definitions),
    };
    match check(&inputs) {
        Ok(_) => Vec::new(),
        Err(diagnostics) => diagnostics.iter().map(|d| d.one_line()).collect(),
    }
}

#[test]
fn the_good_set_passes() {
    assert_eq!(run(GOOD), Vec::<String>::new());
}

#[test]
fn each_broken_definition_is_refused_where_it_is_broken() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "action: sha256",
            "action: sha265",
            "instructions.yaml:5:13: error: definition `file_hash`: plugin `files` declares no action `sha265` (help: did you mean `sha256`?)",
        ),
        (
            "plugin: files",
            "plugin: file",
            "instructions.yaml:4:13: error: definition `file_hash`: no plugin manifest declares plugin `file` (help: did you mean `files`?",
        ),
        (
            "class: read",
            "class: change",
            "instructions.yaml:6:12: error: definition `file_hash`: class `change` contradicts action `files.sha256`, which is `read`",
        ),
        (
            "path: {type: string}",
            "path: {type: strin}",
            "instructions.yaml:10:22: error: definition `file_hash`: parameters is not valid JSON Schema 2020-12",
        ),
        (
            "path: {type: string}",
            "path: {type: string, pattern: \"(\"}",
            "instructions.yaml:8:7: error: definition `file_hash`: parameters does not compile",
        ),
        (
            "path: {type: string}",
            "path: {type: integer}",
            "instructions.yaml:10:15: error: definition `file_hash`: parameter `path` must be `type: string`, as the action declares",
        ),
        (
            "path: {type: string}",
            "paht: {type: string}",
            "instructions.yaml:10:15: error: definition `file_hash`: action `sha256` takes no parameter `paht` (help: did you mean `path`?)",
        ),
        (
            "      required: [path]\n",
            "",
            "instructions.yaml:8:7: error: definition `file_hash`: action `sha256` cannot run without `path`",
        ),
        (
            "      additionalProperties: false\n",
            "",
            "instructions.yaml:8:7: error: definition `file_hash`: parameters must say `additionalProperties: false`",
        ),
        (
            "path: {type: string}",
            "path: {type: string, description: A path, absolute.}",
            "instructions.yaml:10:51: error: definition `file_hash`: parameters: `absolute.` is a key with no value, not a JSON Schema keyword (help: in a YAML flow mapping an unquoted comma starts a new key",
        ),
        (
            "path: {type: string}",
            "path: {type: string, maxLenght: 4096}",
            "instructions.yaml:10:30: error: definition `file_hash`: parameters: `maxLenght` is not a JSON Schema 2020-12 keyword (help: did you mean `maxLength`?)",
        ),
        (
            "timeout_ms: 1000",
            "timeout_ms: 0",
            "instructions.yaml:13:17: error: definition `file_hash`: timeout_ms must be 1-3600000, not 0",
        ),
        (
            "timeout_ms: 1000",
            "timeout_ms: 1000\n    columns: [sha265]",
            "instructions.yaml:14:15: error: definition `file_hash`: action `files.sha256` has no column `sha265` (help: did you mean `sha256`?)",
        ),
        (
            "timeout_ms: 1000",
            "timeout_ms: 1000\n    colour: red",
            "instructions.yaml:14:5: error: unknown key `colour`",
        ),
    ];
    for (from, to, expected) in cases {
        let broken = GOOD.replace(from, to);
        assert_ne!(broken, GOOD, "{from}");
        let got = run(&broken);
        assert!(got.iter().any(|d| d.starts_with(expected)), "{to}:\n  expected {expected}\n  got {got:#?}");
    }
}

#[test]
fn a_diagnostic_change_and_a_duplicate_name_are_refused() {
    let change = GOOD
        .replace("name: file_hash", "name: add")
        .replace("action: sha256", "action: append")
        .replace("class: read", "class: change")
        .replace("path", "line");
    let got = run(&change);
    assert!(
        got.iter().any(|d| d.contains("14:17") && d.contains("only read-only definitions can be diagnostic")),
        "{got:#?}"
    );
    let twice = format!("{GOOD}{}", GOOD.trim_start_matches("definitions:\n"));
    assert!(run(&twice).iter().any(|d| d.contains("another definition has this name")), "{:#?}", run(&twice));
}

#[test]
fn secrets_are_only_those_the_action_reads_and_never_for_a_diagnostic() {
    let bad_name = MANIFEST.replace("{name: token,", "{name: bad name!,");
    let manifest_problems = run_with(&bad_name, GOOD);
    assert_eq!(manifest_problems.len(), 1, "{manifest_problems:#?}");
    assert!(manifest_problems[0].contains("secret name `bad name!` must match"), "{manifest_problems:#?}");
    let with = |secrets: &str, action: &str, class: &str, diagnostic: bool| {
        GOOD.replace("action: sha256", action)
            .replace("class: read", class)
            .replace("path", "line")
            .replace("    diagnostic: true\n", &format!("    diagnostic: {diagnostic}\n    secrets: {secrets}\n"))
    };
    let got = run(&with("[token, tokn, token]", "action: append", "class: change\n    touches: t\n    undo: u", false));
    assert!(
        got.iter()
            .any(|d| d.contains("action `files.append` reads no secret `tokn`") && d.contains("did you mean `token`")),
        "{got:#?}"
    );
    assert!(got.iter().any(|d| d.contains("secret `token` is listed twice")), "{got:#?}");
    let got = run(&with("[token]", "action: sha256", "class: read", true));
    assert!(got.iter().any(|d| d.contains("action `files.sha256` reads no secret `token`")), "{got:#?}");
    assert!(got.iter().any(|d| d.contains("a diagnostic definition runs on a quarantined agent")), "{got:#?}");
}

/// Every change declares its plan (the manifest) and what it touches and how it is undone
/// (the definition); a read has none of these.
#[test]
fn a_change_declares_its_plan_what_it_touches_and_its_undo() {
    let unplanned = MANIFEST
        .replace("    plan:\n      - {name: count_after, type: integer, description: Lines it would hold.}\n", "");
    let got = run_with(&unplanned, GOOD);
    assert!(
        got.iter().any(|d| d.starts_with("plugins/files.yaml:") && d.contains("change `append` declares no plan")),
        "{got:#?}"
    );
    let planned_read = MANIFEST.replace(
        "      - {name: sha256, type: text, description: The hash.}\n",
        "      - {name: sha256, type: text, description: The hash.}\n    plan:\n      - {name: x, type: text, description: X.}\n",
    );
    assert!(run_with(&planned_read, GOOD).iter().any(|d| d.contains("read `sha256` declares a plan")));
    let change = GOOD
        .replace("name: file_hash", "name: add")
        .replace("action: sha256", "action: append")
        .replace("class: read", "class: change")
        .replace("path", "line")
        .replace("    diagnostic: true\n", "    touches: One file.\n");
    let got = run(&change);
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(
        got[0].starts_with("instructions.yaml:6:12: error: definition `add`: a change must declare `undo`"),
        "{got:#?}"
    );
    assert_eq!(
        run(&change.replace("    touches: One file.\n", "    touches: One file.\n    undo: Remove it.\n")),
        Vec::<String>::new()
    );
    let read_with_undo = GOOD.replace("    diagnostic: true\n", "    diagnostic: true\n    undo: Nothing.\n");
    assert!(run(&read_with_undo).iter().any(|d| d.contains("only a change declares `touches` and `undo`")));
}

#[test]
fn compliance_files_are_checked_at_their_lines() {
    let good = "rules:\n  - id: ssh-config\n    description: x\n    check: {file_contains_line: {path: /etc/ssh/sshd_config, line: PermitRootLogin no}}\n";
    assert_eq!(check_compliance(&SourceFile::new("compliance.yaml", good)).unwrap().rules.len(), 1);
    let cases = [
        (
            good.replace("/etc/ssh", "etc/ssh"),
            "compliance.yaml:4:33: error: rule `ssh-config`: path `etc/ssh/sshd_config` must be absolute",
        ),
        (
            good.replace("file_contains_line", "file_contains_lines"),
            "compliance.yaml:4:13: error: `check` cannot be `file_contains_lines`: it is exactly one of `package_at_least`, `file_contains_line`, `port_not_listening`, `file_sha256` (help: did you mean `file_contains_line`?)",
        ),
        (good.replace("ssh-config", "SSH config"), "compliance.yaml:2:9: error: rule id `SSH config` must match"),
        (
            format!("{good}{}", good.trim_start_matches("rules:\n")),
            "compliance.yaml:5:9: error: another rule has the id `ssh-config`",
        ),
    ];
    for (text, expected) in cases {
        let got: Vec<String> = check_compliance(&SourceFile::new("compliance.yaml", text.clone()))
            .unwrap_err()
            .iter()
            .map(|d| d.one_line())
            .collect();
        assert!(got.iter().any(|d| d.starts_with(expected)), "{text}\n  expected {expected}\n  got {got:#?}");
    }
}

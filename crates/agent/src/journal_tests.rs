use serde_json::{Map, json};
use toolgate_domain::fleet::instruction::ActionClass;

use super::*;

fn order(execution_id: &str, steps: Vec<RunStep>) -> RunOrder {
    RunOrder { execution_id: execution_id.into(), deadline_ms: i64::MAX, steps }
}

fn append(line: &str, diagnostic: bool) -> RunStep {
    RunStep {
        definition: "append_line".into(),
        plugin: "workspace".into(),
        action: "append_line".into(),
        class: ActionClass::Change,
        diagnostic,
        params: json!({"file": "f", "line": line}).as_object().cloned().unwrap(),
        timeout_ms: 10_000,
        secret_names: Vec::new(),
        config: Default::default(),
        secrets: Default::default(),
        mode: Default::default(),
        approved_plan: None,
        approved_plans: Default::default(),
    }
}

fn facts() -> RunStep {
    RunStep {
        definition: "os_facts".into(),
        plugin: "host".into(),
        action: "facts".into(),
        class: ActionClass::Read,
        diagnostic: true,
        params: Map::new(),
        timeout_ms: 10_000,
        secret_names: Vec::new(),
        config: Default::default(),
        secrets: Default::default(),
        mode: Default::default(),
        approved_plan: None,
        approved_plans: Default::default(),
    }
}

fn setup() -> (tempfile::TempDir, PluginContext) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = PluginContext::new(dir.path().to_path_buf());
    (dir, ctx)
}

fn lines(ctx: &PluginContext) -> usize {
    std::fs::read_to_string(ctx.work_dir().join("f")).map_or(0, |t| t.lines().count())
}

#[test]
fn a_repeated_order_runs_a_change_once_and_answers_from_the_journal() {
    let (_dir, ctx) = setup();
    let order = order("exe-00aa", vec![append("x", false)]);
    let first = execute(&ctx, &order, &Quarantine::default(), &[]);
    let again = execute(&ctx, &order, &Quarantine::default(), &[]);
    assert_eq!(first.steps[0].status, StepStatus::Succeeded);
    assert_eq!(again, first, "the second answer is the first one, from the journal");
    assert_eq!(lines(&ctx), 1);
}

#[test]
fn a_change_started_but_never_recorded_is_interrupted_not_rerun() {
    let (_dir, ctx) = setup();
    // What a crash between "started" and the outcome leaves behind.
    let mut journal = Journal::open(&ctx.state_dir, "exe-00bb").unwrap();
    journal.record(0, Entry::Started).unwrap();
    let result = execute(&ctx, &order("exe-00bb", vec![append("x", false)]), &Quarantine::default(), &[]);
    assert_eq!(result.steps[0].status, StepStatus::Failed);
    assert!(result.steps[0].error.as_deref().unwrap().starts_with("interrupted"));
    assert_eq!(lines(&ctx), 0, "never run after an interruption");
}

#[test]
fn a_bundle_stops_at_its_first_failure_and_quarantine_allows_diagnostics_only() {
    let (_dir, ctx) = setup();
    let bad =
        RunStep { params: json!({"file": "../x", "line": "y"}).as_object().cloned().unwrap(), ..append("", false) };
    let result = execute(&ctx, &order("exe-00cc", vec![facts(), bad, append("z", false)]), &Quarantine::default(), &[]);
    let statuses: Vec<_> = result.steps.iter().map(|s| s.status).collect();
    assert_eq!(statuses, [StepStatus::Succeeded, StepStatus::Failed, StepStatus::Skipped]);
    let quarantined = Quarantine { quarantined: true, reason: Some("test".into()) };
    let result = execute(&ctx, &order("exe-00dd", vec![facts(), append("q", false)]), &quarantined, &[]);
    assert_eq!(result.steps[0].status, StepStatus::Succeeded, "a diagnostic runs");
    assert!(result.steps[1].error.as_deref().unwrap().starts_with("quarantined"));
    assert_eq!(lines(&ctx), 0);
    assert!(Journal::open(&ctx.state_dir, "../etc").is_err(), "an id is never a path");
}

#[test]
fn a_steps_result_is_scrubbed_of_the_secrets_it_was_given() {
    let (_dir, ctx) = setup();
    let mut secrets = toolgate_domain::fleet::wire::SecretValues::default();
    secrets.0.insert("token".into(), "hunter2secret".into());
    // An error that quotes the parameter holding the secret, and a row that echoes it.
    let echoed = RunStep {
        params: json!({"file": "hunter2secret/../x", "line": "y"}).as_object().cloned().unwrap(),
        secrets: secrets.clone(),
        ..append("", false)
    };
    let result = execute(&ctx, &order("exe-00ee", vec![echoed]), &Quarantine::default(), &[]);
    let error = result.steps[0].error.as_deref().unwrap();
    assert!(error.contains("[secret]/../x") && !error.contains("hunter2"), "{error}");
    let marker = RunStep {
        definition: "write_marker".into(),
        action: "write_marker".into(),
        params: json!({"name": "hunter2secret"}).as_object().cloned().unwrap(),
        secrets,
        ..append("", false)
    };
    let result = execute(&ctx, &order("exe-00ef", vec![marker]), &Quarantine::default(), &[]);
    let text = serde_json::to_string(&result).unwrap();
    assert!(text.contains("[secret]") && !text.contains("hunter2"), "{text}");
    let journals = std::fs::read_dir(ctx.state_dir.join("runs")).unwrap();
    for journal in journals {
        assert!(!std::fs::read_to_string(journal.unwrap().path()).unwrap().contains("hunter2"), "journaled scrubbed");
    }
}

#[test]
fn what_ran_is_answered_from_the_journal_even_after_a_switch_stops_its_plugin() {
    let (_dir, ctx) = setup();
    let ran = order("exe-00ee", vec![append("x", false)]);
    let first = execute(&ctx, &ran, &Quarantine::default(), &[]);
    let switch = engaged("workspace");
    assert_eq!(
        execute(&ctx, &ran, &Quarantine::default(), std::slice::from_ref(&switch)),
        first,
        "ran before the switch"
    );
    let other = execute(&ctx, &order("exe-00ef", vec![append("y", false)]), &Quarantine::default(), &[switch]);
    assert_eq!(other.steps[0].status, StepStatus::Failed, "what never ran is stopped");
    assert_eq!(lines(&ctx), 1);
}

fn engaged(plugin: &str) -> KillSwitch {
    KillSwitch {
        plugin: plugin.into(),
        action: None,
        enabled: true,
        reason: Some("test".into()),
        updated_at: None,
        updated_by: None,
    }
}

fn reboot_step() -> RunStep {
    RunStep {
        definition: "reboot".into(),
        plugin: "host".into(),
        action: "reboot".into(),
        params: json!({"delay_minutes": 0}).as_object().cloned().unwrap(),
        ..append("", false)
    }
}

#[test]
fn a_reboot_asked_for_in_an_earlier_boot_ends_with_both_boots() {
    let (_dir, ctx) = setup();
    let now = reboot::this_boot().unwrap();
    let from = Boot { boot_id: "00000000-0000-4000-8000-000000000000".into(), booted_at_ms: now.booted_at_ms - 60_000 };
    let mut journal = Journal::open(&ctx.state_dir, "exe-01aa").unwrap();
    journal.record(0, Entry::AwaitingReboot { from: from.clone() }).unwrap();
    let switch = engaged("host");
    let result = execute(&ctx, &order("exe-01aa", vec![reboot_step()]), &Quarantine::default(), &[switch]);
    assert_eq!(result.steps[0].status, StepStatus::Succeeded, "{:?}", result.steps[0].error);
    assert_eq!(result.steps[0].rows, reboot::came_back(&from, &now));
    assert_eq!(now.booted_at_ms, result.steps[0].rows[0]["booted_at_ms"]);
}

#[test]
fn a_reboot_still_awaited_in_the_same_boot_waits_again_within_the_steps_timeout() {
    let (_dir, ctx) = setup();
    let mut journal = Journal::open(&ctx.state_dir, "exe-01bb").unwrap();
    journal.record(0, Entry::AwaitingReboot { from: reboot::this_boot().unwrap() }).unwrap();
    let step = RunStep { timeout_ms: 50, ..reboot_step() };
    let result = execute(&ctx, &order("exe-01bb", vec![step]), &Quarantine::default(), &[]);
    assert_eq!(result.steps[0].status, StepStatus::TimedOut, "it waited for the host to go down, and it did not");
}

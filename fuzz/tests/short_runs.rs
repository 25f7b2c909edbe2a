//! A short, fixed number of executions of every target in the test command (scripts/fuzz.sh
//! runs them long). A crash fails the test with its input, as base64-free bytes in the message.

use toolgate_fuzz::{TARGETS, corpus, run};

/// Executions per target in a debug build: a catalogue input costs ~15 ms to check there and
/// a whole YAML file ~65 ms to parse, check and emit; the decoder and validation microseconds.
/// scripts/fuzz.sh runs release builds long.
fn runs(target: &str) -> u64 {
    match target {
        "yaml" => 100,
        "catalogue" => 400,
        _ => 20_000,
    }
}

/// One test per target, so that the test threads share them out.
macro_rules! short_runs {
    ($($target:ident),+ $(,)?) => {
        $(
            #[test]
            fn $target() {
                survives_a_short_run(stringify!($target));
            }
        )+

        #[test]
        fn every_target_has_a_short_run() {
            let tested = [$(stringify!($target)),+];
            let targets: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
            assert_eq!(targets, tested, "a target without a test here is never run by the test command");
        }
    };
}

short_runs!(yaml, jsonrpc, arguments, catalogue, agent_frame, scope);

fn survives_a_short_run(name: &str) {
    let target = TARGETS.iter().find(|t| t.name == name).expect("a target of that name");
    let seeds = corpus(target.name);
    assert!(!seeds.is_empty(), "{}: the corpus is empty", target.name);
    let report = run(target, &seeds, runs(target.name), 7, None);
    assert_eq!(report.execs, runs(target.name));
    let crashes: Vec<String> =
        report.crashes.iter().map(|c| format!("{} on {:?}", c.message, String::from_utf8_lossy(&c.input))).collect();
    assert!(crashes.is_empty(), "{}: {} crashes: {crashes:#?}", target.name, crashes.len());
    println!("{}: {} execs in {:.2} s, 0 crashes", target.name, report.execs, report.elapsed.as_secs_f64());
}

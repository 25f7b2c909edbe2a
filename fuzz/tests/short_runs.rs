//! A short, fixed number of executions of every target in the test command (scripts/fuzz.sh
//! runs them long). A crash fails the test with its input, as base64-free bytes in the message.

use toolgate_fuzz::{TARGETS, corpus, run};

/// Executions per target in a debug build: the catalogue checker costs ~10 ms an input
/// there, the decoder and validation microseconds. scripts/fuzz.sh runs release builds long.
fn runs(target: &str) -> u64 {
    if matches!(target, "yaml" | "catalogue") { 400 } else { 20_000 }
}

#[test]
fn every_target_survives_a_short_run() {
    for target in &TARGETS {
        let seeds = corpus(target.name);
        assert!(!seeds.is_empty(), "{}: the corpus is empty", target.name);
        let report = run(target, &seeds, runs(target.name), 7, None);
        assert_eq!(report.execs, runs(target.name));
        let crashes: Vec<String> = report
            .crashes
            .iter()
            .map(|c| format!("{} on {:?}", c.message, String::from_utf8_lossy(&c.input)))
            .collect();
        assert!(crashes.is_empty(), "{}: {} crashes: {crashes:#?}", target.name, crashes.len());
        println!("{}: {} execs in {:.2} s, 0 crashes", target.name, report.execs, report.elapsed.as_secs_f64());
    }
}

//! `cargo run -p toolgate-fuzz --release -- [TARGET] --runs N --seconds S --seed X`: a long
//! run (scripts/fuzz.sh). Every crashing input is written to fuzz/crashes/<target>/.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use toolgate_fuzz::{TARGETS, corpus, run};

#[derive(Parser)]
#[command(about = "Fuzz toolgate's untrusted-input paths on stable Rust")]
struct Args {
    /// yaml, jsonrpc, arguments, catalogue, agent_frame or scope; all of them when absent.
    target: Option<String>,
    /// Executions per target.
    #[arg(long, default_value_t = u64::MAX)]
    runs: u64,
    /// Time per target.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let chosen: Vec<_> = TARGETS.iter().filter(|t| args.target.as_deref().is_none_or(|n| n == t.name)).collect();
    if chosen.is_empty() {
        let names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
        eprintln!("no target `{}`; the targets are {}", args.target.unwrap_or_default(), names.join(", "));
        return ExitCode::FAILURE;
    }
    let mut failed = false;
    for target in chosen {
        let deadline = Instant::now() + Duration::from_secs(args.seconds);
        let report = run(target, &corpus(target.name), args.runs, args.seed, Some(deadline));
        println!(
            "{}: {} execs in {:.1} s ({:.0}/s), {} crashes",
            report.target,
            report.execs,
            report.elapsed.as_secs_f64(),
            report.execs_per_sec(),
            report.crashes.len()
        );
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crashes").join(target.name);
        for (i, crash) in report.crashes.iter().enumerate() {
            failed = true;
            let _ = std::fs::create_dir_all(&dir);
            let path = dir.join(format!("seed{}-{i}.bin", args.seed));
            let _ = std::fs::write(&path, &crash.input);
            println!("  crash: {} (input in {})", crash.message, path.display());
        }
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

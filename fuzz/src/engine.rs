//! The mutation engine: pick a seed, apply a few random edits (bit flips, byte and range
//! inserts and deletes, splices with another seed, the target's dictionary tokens), run the
//! target under `catch_unwind`, keep every input that panicked. Deterministic for a seed.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use crate::Target;

#[derive(Debug)]
pub struct Crash {
    pub input: Vec<u8>,
    pub message: String,
}

#[derive(Debug)]
pub struct Report {
    pub target: &'static str,
    pub execs: u64,
    pub crashes: Vec<Crash>,
    pub elapsed: Duration,
}

impl Report {
    pub fn execs_per_sec(&self) -> f64 {
        self.execs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

fn mutate(rng: &mut fastrand::Rng, seed: &[u8], corpus: &[Vec<u8>], dictionary: &[&[u8]]) -> Vec<u8> {
    let mut input = seed.to_vec();
    for _ in 0..rng.usize(1..=8) {
        let at = rng.usize(0..=input.len());
        match rng.u8(0..7) {
            0 if !input.is_empty() => {
                let i = rng.usize(0..input.len());
                input[i] ^= 1 << rng.u8(0..8);
            }
            1 => input.insert(at, rng.u8(..)),
            2 if !input.is_empty() => {
                let end = (at + rng.usize(1..=16)).min(input.len());
                input.drain(at.min(end)..end);
            }
            3 if !input.is_empty() => {
                let start = rng.usize(0..input.len());
                let end = (start + rng.usize(1..=64)).min(input.len());
                let chunk = input[start..end].to_vec();
                input.splice(at..at, chunk);
            }
            4 if !corpus.is_empty() => {
                let other = &corpus[rng.usize(0..corpus.len())];
                let start = rng.usize(0..=other.len());
                let end = (start + rng.usize(0..=256)).min(other.len());
                input.splice(at..at, other[start..end].iter().copied());
            }
            5 if !dictionary.is_empty() => {
                let token = dictionary[rng.usize(0..dictionary.len())];
                input.splice(at..at, token.iter().copied());
            }
            _ => {
                let end = (at + rng.usize(0..=8)).min(input.len());
                let replacement: Vec<u8> = (0..rng.usize(0..=8)).map(|_| rng.u8(..)).collect();
                input.splice(at..end, replacement);
            }
        }
    }
    input.truncate(1 << 16);
    input
}

/// Runs `target` `runs` times (or until `deadline`), starting with each seed as it is.
pub fn run(target: &Target, corpus: &[Vec<u8>], runs: u64, seed: u64, deadline: Option<Instant>) -> Report {
    let mut rng = fastrand::Rng::with_seed(seed);
    let started = Instant::now();
    let mut crashes = Vec::new();
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut execs = 0;
    while execs < runs && deadline.is_none_or(|d| Instant::now() < d) {
        let input = match corpus.get(execs as usize) {
            Some(seed) => seed.clone(),
            None if corpus.is_empty() => (0..rng.usize(0..256)).map(|_| rng.u8(..)).collect(),
            None => {
                let pick = rng.usize(0..corpus.len());
                mutate(&mut rng, &corpus[pick], corpus, target.dictionary)
            }
        };
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| (target.run)(&input))) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic with no message".into());
            crashes.push(Crash { input, message });
        }
        execs += 1;
    }
    std::panic::set_hook(previous_hook);
    Report { target: target.name, execs, crashes, elapsed: started.elapsed() }
}

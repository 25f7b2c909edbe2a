//! Fuzzing on stable Rust: each target takes arbitrary bytes; the engine ([`engine`]) feeds it
//! mutations of a committed corpus (`fuzz/corpus/<target>/`) and reports every panic with the
//! input that caused it. The targets are the server's own code paths for untrusted input:
//! the catalogue loader and checker (and the emitters, when a catalogue checks; a generator of
//! well-formed catalogues gets there more often than mutated text), the JSON-RPC
//! decoder and header decoding, argument validation with the reply built from it, the agent
//! protocol's frames through the hub's conversation, and the scope language.

mod agent;
mod catalogue;
pub mod engine;
mod targets;

pub use engine::{Crash, Report, run};
pub use targets::{TARGETS, Target};

/// The committed seeds of `target`.
pub fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("no corpus at {}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).expect("a corpus file reads")).collect()
}

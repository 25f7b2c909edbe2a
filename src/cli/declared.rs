//! `toolgate check`'s part beyond tools.yaml and policy.yaml: the declared data beside them
//! (instruction definitions and plugin manifests, experience signals), checked by the build's
//! own rules and reported the same way, `file:line:col`.

use std::path::Path;

/// The instruction definitions and plugin manifests beside the tools file, by the build's
/// rules; prints what it found. False on errors (a tree without them has nothing to check).
pub(super) fn check_instructions(root: &Path) -> bool {
    use toolgate_catalogue::instructions::{self, DEFINITIONS_FILE, InstructionInputs};
    if !root.join(DEFINITIONS_FILE).is_file() {
        println!("{DEFINITIONS_FILE}: not found next to the tools file; instructions not checked");
        return true;
    }
    let inputs = match InstructionInputs::read(root) {
        Ok(inputs) => inputs,
        Err(e) => {
            eprintln!("error: {e}");
            return false;
        }
    };
    match instructions::check(&inputs) {
        Ok(set) => {
            println!(
                "{DEFINITIONS_FILE} and {} manifest(s): {} definitions, {} plugins; 0 errors",
                inputs.manifests.len(),
                set.definitions.len(),
                set.plugins.len()
            );
            true
        }
        Err(diagnostics) => {
            for d in &diagnostics {
                let text = std::iter::once(&inputs.definitions)
                    .chain(&inputs.manifests)
                    .find(|f| f.name == d.file)
                    .map(|f| f.text.as_str());
                eprintln!("{}", d.render(text));
            }
            println!("{DEFINITIONS_FILE} and its manifests: {} errors", diagnostics.len());
            false
        }
    }
}

/// The experience signals beside the tools file, by the build's rules (docs/experience.md).
pub(super) fn check_signals(root: &Path) -> bool {
    use toolgate_catalogue::experience::{self, SIGNALS_FILE};
    if !root.join(SIGNALS_FILE).is_file() {
        println!("{SIGNALS_FILE}: not found next to the tools file; signals not checked");
        return true;
    }
    let file = match toolgate_catalogue::SourceFile::read(&root.join(SIGNALS_FILE), SIGNALS_FILE) {
        Ok(file) => file,
        Err(e) => {
            eprintln!("error: cannot read {SIGNALS_FILE}: {e}");
            return false;
        }
    };
    match experience::check(&file) {
        Ok(signals) => {
            println!("{SIGNALS_FILE}: {} signals; 0 errors", signals.signals.len());
            true
        }
        Err(diagnostics) => {
            for d in &diagnostics {
                eprintln!("{}", d.render(Some(&file.text)));
            }
            println!("{SIGNALS_FILE}: {} errors", diagnostics.len());
            false
        }
    }
}

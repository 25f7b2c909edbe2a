//! toolgate's generator: `tools.yaml` + `policy.yaml` -> checked model -> generated registry.
//!
//! load and check (`toolgate-catalogue`: every cross-file rule, all diagnostics at once), the
//! handler-signature rule (syn, here: `handlers`), then emit (registry, typed arguments,
//! dispatch, matrix, `tools/list` bytes, cross-check tests). A build dependency only: the
//! server links the catalogue crate, never this one.

pub mod emit;
pub mod handlers;
pub mod names;

use std::path::{Path, PathBuf};

pub use emit::{OutputFile, SourcePaths};
pub use toolgate_catalogue::{
    Checked, Diagnostic, Severity, SourceFile, args, bless, check as rules, diag, editor_schemas, experience,
    instructions, load, model, policy, source,
};

/// The two files, and where the Rust handlers live (None skips the handler-signature rule).
pub struct Inputs {
    pub tools: SourceFile,
    pub policy: SourceFile,
    pub handlers_dir: Option<PathBuf>,
}

/// Loads and checks both files, the handlers' Rust included when `handlers_dir` is given.
/// `Err` carries every error and warning; `Ok` the warnings.
pub fn check(inputs: &Inputs) -> Result<Checked, Vec<Diagnostic>> {
    let files = toolgate_catalogue::Inputs { tools: inputs.tools.clone(), policy: inputs.policy.clone() };
    let rust = inputs.handlers_dir.as_deref().map(handlers::syn_handlers);
    toolgate_catalogue::check(&files, rust.as_ref().map(|r| r as &dyn rules::handlers::RustHandlers))
}

/// Writes the files whose contents changed, so cargo does not rebuild what did not.
pub fn write_if_changed(dir: &Path, files: &[OutputFile]) -> std::io::Result<()> {
    for file in files {
        let path = dir.join(&file.name);
        if std::fs::read(&path).ok().as_deref() != Some(file.contents.as_bytes()) {
            std::fs::write(&path, &file.contents)?;
        }
    }
    Ok(())
}

/// Everything `build.rs` does, so that it stays a few lines: read the inputs (or the
/// `TOOLGATE_TOOLS` / `TOOLGATE_POLICY` overrides), check, emit, and speak cargo's protocol.
/// Returns false when the build must fail.
pub fn build_script(manifest_dir: &Path, out_dir: &Path) -> bool {
    println!("cargo::rerun-if-env-changed=TOOLGATE_TOOLS");
    println!("cargo::rerun-if-env-changed=TOOLGATE_POLICY");
    let pick = |var: &str, default: &str| -> (PathBuf, String) {
        match std::env::var(var) {
            Ok(p) if !p.is_empty() => (manifest_dir.join(&p), p),
            _ => (manifest_dir.join(default), default.to_string()),
        }
    };
    // The root crate's feature `conformance-catalogue` builds the conformance suite's fixture
    // (scripts/suite_build.sh): a feature, not the variables, so that cargo keeps both builds.
    let (tools, policy) = match std::env::var_os("CARGO_FEATURE_CONFORMANCE_CATALOGUE") {
        Some(_) => ("tests/conformance/tools.yaml", "tests/conformance/policy.yaml"),
        None => ("tools.yaml", "policy.yaml"),
    };
    let (tools_path, tools_name) = pick("TOOLGATE_TOOLS", tools);
    let (policy_path, policy_name) = pick("TOOLGATE_POLICY", policy);
    let handlers_dir = manifest_dir.join("src/handlers");
    for path in [&tools_path, &policy_path] {
        println!("cargo::rerun-if-changed={}", path.display());
    }
    let read = |path: &Path, name: String| {
        SourceFile::read(path, name.clone()).map_err(|e| format!("{name}: cannot read {}: {e}", path.display()))
    };
    let (tools, policy) = match (read(&tools_path, tools_name), read(&policy_path, policy_name)) {
        (Ok(t), Ok(p)) => (t, p),
        (t, p) => {
            for e in [t.err(), p.err()].into_iter().flatten() {
                println!("cargo::error={e}");
            }
            return false;
        }
    };
    let inputs = Inputs { tools, policy, handlers_dir: Some(handlers_dir.clone()) };
    let checked = match check(&inputs) {
        Ok(checked) => checked,
        Err(diagnostics) => {
            for d in &diagnostics {
                let kind = if d.is_error() { "error" } else { "warning" };
                println!("cargo::{kind}={}", d.one_line());
            }
            // The handler files were read: a fix there must re-run us too.
            println!("cargo::rerun-if-changed={}", handlers_dir.display());
            return false;
        }
    };
    for d in &checked.warnings {
        println!("cargo::warning={}", d.one_line());
    }
    for file in &checked.handler_files {
        println!("cargo::rerun-if-changed={}", file.display());
    }
    let paths = SourcePaths {
        tools: tools_path.display().to_string(),
        policy: policy_path.display().to_string(),
        handlers_dir: handlers_dir.display().to_string(),
    };
    let mut files = emit::all(&checked, &paths);
    println!("cargo::rerun-if-changed={}", manifest_dir.join(instructions::MANIFESTS_DIR).display());
    println!("cargo::rerun-if-changed={}", manifest_dir.join(instructions::DEFINITIONS_FILE).display());
    let instruction_set = instructions::InstructionInputs::read(manifest_dir)
        .map_err(|e| vec![e])
        .and_then(|inputs| instructions::check(&inputs).map_err(|d| d.iter().map(Diagnostic::one_line).collect()));
    match instruction_set {
        Ok(set) => files.push(OutputFile {
            name: "instructions.json".into(),
            contents: serde_json::to_string(&set).expect("the instruction set serializes"),
        }),
        Err(errors) => {
            for e in errors {
                println!("cargo::error={e}");
            }
            return false;
        }
    }
    println!("cargo::rerun-if-changed={}", manifest_dir.join(experience::SIGNALS_FILE).display());
    let signals = SourceFile::read(&manifest_dir.join(experience::SIGNALS_FILE), experience::SIGNALS_FILE)
        .map_err(|e| vec![format!("cannot read {}: {e}", experience::SIGNALS_FILE)])
        .and_then(|file| experience::check(&file).map_err(|d| d.iter().map(Diagnostic::one_line).collect()));
    match signals {
        Ok(signals) => files.push(OutputFile {
            name: "experience.json".into(),
            contents: serde_json::to_string(&signals).expect("the signals serialize"),
        }),
        Err(errors) => {
            for e in errors {
                println!("cargo::error={e}");
            }
            return false;
        }
    }
    if let Err(e) = write_if_changed(out_dir, &files) {
        println!("cargo::error=cannot write generated files to {}: {e}", out_dir.display());
        return false;
    }
    true
}

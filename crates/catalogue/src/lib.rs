//! toolgate's catalogue, read and checked: `tools.yaml` + `policy.yaml` (and the instruction
//! definitions, plugin manifests and compliance rules) loaded with positions, every cross-file
//! rule applied, every diagnostic at once. No code generation and no Rust parsing: the server
//! links this for `toolgate check`, `explain` and compliance loading; `toolgate-codegen` (a
//! build dependency only) adds the generated code and the handler-signature rule.

pub mod args;
pub mod bless;
pub mod check;
pub mod deployment;
pub mod diag;
pub mod experience;
pub mod instructions;
pub mod load;
pub mod model;
pub mod policy;
pub mod source;
pub mod tools_list;

pub use check::Checked;
pub use diag::{Diagnostic, Severity};
pub use source::SourceFile;

/// The two files.
pub struct Inputs {
    pub tools: SourceFile,
    pub policy: SourceFile,
}

/// Loads and checks both files. `Err` carries every error and warning; `Ok` the warnings.
/// `rust_handlers` reads the handlers' Rust (the build's, with syn); without it the handler
/// rule checks what tools.yaml says and leaves the signatures to the build.
pub fn check(
    inputs: &Inputs,
    rust_handlers: Option<&dyn check::handlers::RustHandlers>,
) -> Result<Checked, Vec<Diagnostic>> {
    let (tools, mut tool_shape) = load::parse_catalogue_recovering(&inputs.tools);
    let policy = load::parse_policy(&inputs.policy);
    match (tools, policy) {
        (Some(tools), Ok(policy)) if tool_shape.is_empty() => check::run(tools, policy, rust_handlers),
        (Some(tools), Ok(policy)) => {
            // Some entries were set aside: report the rest's errors too, but not warnings
            // that the missing entries may have caused (e.g. "rule matches no tool").
            let rest = match check::run(tools, policy, rust_handlers) {
                Ok(checked) => checked.warnings,
                Err(all) => all,
            };
            tool_shape.extend(rest.into_iter().filter(Diagnostic::is_error));
            diag::sort(&mut tool_shape);
            Err(tool_shape)
        }
        (_, policy) => {
            tool_shape.extend(policy.err().into_iter().flatten());
            diag::sort(&mut tool_shape);
            Err(tool_shape)
        }
    }
}

/// The JSON Schemas of the files toolgate reads, for editors (`schemas/*.json`).
pub fn editor_schemas() -> Vec<(&'static str, String)> {
    let pretty = |v: serde_json::Value| serde_json::to_string_pretty(&v).expect("serializes") + "\n";
    let mut schemas = vec![
        ("tools.schema.json", pretty(load::schema_of::<model::Catalogue>())),
        ("policy.schema.json", pretty(load::schema_of::<model::Policy>())),
        ("deployment.schema.json", pretty(load::schema_of::<deployment::DeploymentFile>())),
    ];
    schemas.extend(instructions::editor_schemas().into_iter().map(|(name, schema)| (name, pretty(schema))));
    let signals = load::schema_of::<toolgate_domain::fleet::signals::SignalsFile>();
    schemas.push(("experience.schema.json", pretty(signals)));
    schemas
}

//! The generated registry (see codegen/ and `OUT_DIR`): `ToolId`, `Tier`, the matrix, the
//! policy tables, `CATALOGUE` and the `tools/list` bytes. Nothing else lives here: the typed
//! arguments are `crate::args`, the dispatch to handlers `crate::tools`.

include!(concat!(env!("OUT_DIR"), "/registry.rs"));

/// The instruction definitions and plugin manifests, checked by the build
/// (`instructions.yaml`, `crates/agent/plugins/*.yaml`).
pub static INSTRUCTIONS: std::sync::LazyLock<toolgate_domain::fleet::instruction::InstructionSet> =
    std::sync::LazyLock::new(|| {
        serde_json::from_str(include_str!(concat!(env!("OUT_DIR"), "/instructions.json")))
            .expect("the build wrote the instruction set it checked")
    });

/// The experience signals, checked by the build (`experience.yaml`, docs/experience.md).
pub static SIGNALS: std::sync::LazyLock<toolgate_domain::fleet::signals::SignalsFile> =
    std::sync::LazyLock::new(|| {
        serde_json::from_str(include_str!(concat!(env!("OUT_DIR"), "/experience.json")))
            .expect("the build wrote the signals it checked")
    });

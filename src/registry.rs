//! The generated registry (see codegen/ and `OUT_DIR`): `ToolId`, `Tier`, the matrix, the
//! policy tables, `CATALOGUE`, the `tools/list` bytes and the dispatch. Nothing else lives here.

include!(concat!(env!("OUT_DIR"), "/registry.rs"));

/// One typed argument struct per tool, from its inputSchema.
#[allow(dead_code, clippy::all)]
pub mod args {
    include!(concat!(env!("OUT_DIR"), "/args.rs"));
}

include!(concat!(env!("OUT_DIR"), "/dispatch.rs"));

/// The instruction definitions and plugin manifests, checked by the build
/// (`instructions.yaml`, `crates/agent/plugins/*.yaml`).
pub static INSTRUCTIONS: std::sync::LazyLock<toolgate_domain::fleet::instruction::InstructionSet> =
    std::sync::LazyLock::new(|| {
        serde_json::from_str(include_str!(concat!(env!("OUT_DIR"), "/instructions.json")))
            .expect("the build wrote the instruction set it checked")
    });

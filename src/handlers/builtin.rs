//! Handlers that need no Rust per tool: fixture catalogues, examples and benchmarks use them.

use serde_json::Value;
use toolgate_domain::catalogue::ToolMeta;
use toolgate_domain::{ToolOutput, ToolResult};

use crate::services::ToolContext;

/// `builtin::echo`: the validated arguments come back as structuredContent.
pub async fn echo(_ctx: &ToolContext, arguments: Value) -> ToolResult {
    Ok(ToolOutput::Structured(arguments))
}

/// `builtin::static`: the result written in the tool's YAML entry.
pub fn static_result(meta: &'static ToolMeta) -> ToolResult {
    let raw = meta.static_result.expect("the generator gives every builtin::static tool a result");
    Ok(ToolOutput::Static(raw))
}

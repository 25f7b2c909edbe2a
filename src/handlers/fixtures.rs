//! Handlers that exist for one conformance scenario each (tests/conformance/tools.yaml names
//! them as such); the shipped catalogue does not use them, so its build leaves them out.

use serde_json::json;
use toolgate_domain::{ToolOutput, ToolResult};

use crate::registry::args;
use crate::services::ToolContext;

/// The conformance suite's `tools-call-with-progress`: 0, 50 and 100 of 100, about 50 ms
/// apart, when the client asked for progress (the same pauses when it did not).
pub async fn test_tool_with_progress(ctx: &ToolContext, _args: args::TestToolWithProgress) -> ToolResult {
    for (i, step) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        ctx.progress().report(step, Some(100.0), None);
    }
    Ok(ToolOutput::Structured(json!({"message": "Done: progress reported at 0, 50 and 100 of 100."})))
}

/// The conformance suite's `tools-call-with-logging`: three info lines about 50 ms apart
/// (sent only when the client asked for a level that admits them).
pub async fn test_tool_with_logging(ctx: &ToolContext, _args: args::TestToolWithLogging) -> ToolResult {
    let lines = ["Tool execution started", "Tool processing data", "Tool execution completed"];
    for (i, line) in lines.into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        ctx.log().info(line);
    }
    Ok(ToolOutput::Structured(json!({"message": "Done: three info lines logged."})))
}

//! Tool handlers: `pub async fn name(ctx: &ToolContext, args: args::Name) -> ToolResult`.
//! The generator checks each signature against tools.yaml and writes the dispatch.

pub mod builtin;
pub mod permissions;
pub mod plugin_config;
pub mod tags;

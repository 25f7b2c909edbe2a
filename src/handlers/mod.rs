//! Tool handlers: `pub async fn name(ctx: &ToolContext, args: args::Name) -> ToolResult`.
//! The generator checks each signature against tools.yaml, writes the dispatch, and declares
//! the modules here that the catalogue uses (so another catalogue builds without them).

/// What the app tools read of each program's series (a catalogue without them uses none of it).
#[allow(dead_code)]
pub(crate) mod app_usage;
pub mod builtin;
/// The caller's part of the fleet: every handler that reads agents goes through it. (A
/// catalogue without such handlers, like the conformance suite's, uses none of it.)
#[allow(dead_code)]
pub(crate) mod confined;
/// Pages that fit a model's context, for every listing tool.
#[allow(dead_code)]
pub(crate) mod pages;
/// The recent views of devices, which the experience tools read (a catalogue without them,
/// like the benchmark's synthetic one, uses none of it).
#[allow(dead_code)]
pub(crate) mod recent_views;
/// Percentiles across devices, for the experience tools (likewise).
#[allow(dead_code)]
pub(crate) mod spread;

include!(concat!(env!("OUT_DIR"), "/handler_modules.rs"));

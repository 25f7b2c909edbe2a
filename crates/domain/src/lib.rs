//! toolgate's domain: what a call is made of, whoever carries it. Nothing here knows HTTP,
//! JSON-RPC or SQL; the store, the gate and the server all speak these types.
//!
//! - [`catalogue`]: the generated tables' types (tools, tiers, roles) and lookups over them;
//! - [`caller`]: who calls, after authentication;
//! - [`context`]: what a handler receives ([`ToolContext`]) and returns ([`ToolResult`]);
//! - [`denial`]: every reason the gate refuses a call, typed;
//! - [`audit`], [`tokens`], [`approvals`], [`records`]: the rows and rules of each area.

pub mod aliases;
pub mod approvals;
pub mod audit;
pub mod caller;
pub mod catalogue;
pub mod certs;
pub mod client;
pub mod clock;
pub mod context;
pub mod denial;
pub mod engines;
pub mod error;
pub mod fleet;
pub mod groups;
pub mod lockout;
pub mod log;
pub mod plugin_secrets;
pub mod prompts_resources;
pub mod records;
pub mod redact;
pub mod reviews;
pub mod secrets;
pub mod targets;
pub mod text;
pub mod tokens;
pub mod tool;
pub mod toolsets;
pub mod uploads;

pub use caller::{Caller, CredentialKind, Principal};
pub use client::{AskError, ClientMethod, ClientRequests, ElicitAction, Elicited, TaskStarter};
pub use clock::Clock;
pub use context::{CancellationToken, Progress, ProgressSink, ToolContext, ToolContextBuilder};
pub use denial::Denial;
pub use error::StoreError;
pub use log::{LogLevel, LogSink};
pub use tool::{Paged, ToolError, ToolOutput, ToolResult, typed_arguments};

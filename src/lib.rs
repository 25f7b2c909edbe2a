//! toolgate: an MCP server whose tool surface is compiled from tools.yaml and policy.yaml.

pub mod admin;
pub mod audit;
pub mod catalogue;
pub mod cli;
pub mod clock;
pub mod gate;
pub mod handlers;
pub mod registry;
pub mod server;
pub mod store;
pub mod tool;

//! toolgate: an MCP server whose tool surface is compiled from tools.yaml and policy.yaml.
//!
//! One request, from the wire to a handler and back: [`http`] (axum: Host/Origin, body
//! limits, authentication) → [`mcp`] (JSON-RPC, the two protocol eras, the method router) →
//! the gate (`toolgate-gate`: kill switch, tier, RBAC, arguments, approval) → [`tools`]'s
//! generated dispatch → a handler in [`handlers`], which reaches the store through
//! [`services`]. Every outcome is audited. [`cli`] holds the console commands.

pub mod args;
pub mod argument_checks;
pub mod cli;
pub mod clients;
pub mod compliance;
pub mod correlation;
pub mod database;
pub mod deployment;
pub mod handlers;
pub mod http;
pub mod identities;
pub mod instructions;
pub mod logging;
pub mod mcp;
pub mod metrics;
pub mod oauth;
pub mod outbound;
pub mod plans;
pub mod prompts_resources;
pub mod registry;
pub mod sealing;
pub mod services;
pub mod summaries;
pub mod tools;
pub mod trust;
pub mod untrusted;

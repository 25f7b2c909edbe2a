//! `toolgate token`: API tokens from the console, on the server's store (works while it runs).

use anyhow::Result;
use clap::Subcommand;

use super::console::{self, NewCredential};
use toolgate_store::Repositories;

#[derive(Subcommand)]
pub enum TokenCommand {
    /// Create a token for a principal; the secret is printed once.
    Create {
        #[arg(long)]
        principal: String,
        /// The MCP tier (readonly, operator, supervised).
        #[arg(long, required_unless_present = "api", conflicts_with = "api")]
        tier: Option<String>,
        /// A credential without MCP tier, for the approval and audit API (administrators).
        #[arg(long)]
        api: bool,
        /// How long it lives (at most 90d): 30d, 12h, 90m.
        #[arg(long, default_value = "30d")]
        expires_in: String,
        #[arg(long, default_value = "cli")]
        name: String,
        /// The toolsets its client is shown when its requests choose none (tools.yaml names,
        /// comma-separated, or all / dynamic; default: its tier's). docs/toolsets.md.
        #[arg(long)]
        toolsets: Option<String>,
    },
    /// List every token (never the secrets).
    List,
    /// Revoke a token by id.
    Revoke { id: String },
}

/// Runs one `toolgate token` command; what it prints.
pub async fn run(store: &Repositories, command: TokenCommand) -> Result<String> {
    match command {
        TokenCommand::Create { principal, tier, api: _, expires_in, name, toolsets } => {
            let asked = NewCredential {
                tier: tier.as_deref(),
                expires_in: &expires_in,
                name: &name,
                toolsets: toolsets.as_deref(),
            };
            console::token_create(store, &principal, asked).await
        }
        TokenCommand::List => console::token_list(store).await,
        TokenCommand::Revoke { id } => console::token_revoke(store, &id).await,
    }
}

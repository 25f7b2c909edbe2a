//! `toolgate ca ...`: the agent CA's generations (docs/trust.md). `import` makes an operator's
//! CA the first, before the server would make its own; `rotate` makes the next,
//! cross-signed by the current one; each server signs with it from its next start and trusts
//! every generation kept, so agents move over as they renew. `retire` then stops trusting an
//! old one, once none of its certificates is still live.

use anyhow::{Result, bail};
use clap::Subcommand;
use toolgate_store::Repositories;

use super::kek::open_vault;
use crate::trust::ca::AgentCa;

#[derive(Subcommand)]
pub enum CaCommand {
    /// The generations kept: which signs, their fingerprints, and how many live (unexpired,
    /// unrevoked) certificates each has issued.
    Status {
        #[arg(long, value_name = "FILE")]
        kek_file: Option<std::path::PathBuf>,
    },
    /// Make the operator's CA (PEM certificate and ECDSA P-256 key) the first generation,
    /// before the first start with a key-encryption key makes one of its own.
    Import {
        #[arg(long, value_name = "FILE")]
        cert: std::path::PathBuf,
        #[arg(long, value_name = "FILE")]
        key: std::path::PathBuf,
        #[arg(long, value_name = "FILE")]
        kek_file: Option<std::path::PathBuf>,
    },
    /// Make the next generation, cross-signed by the current one. Restart every replica (one
    /// at a time): each then signs with it and trusts both.
    Rotate {
        #[arg(long, value_name = "FILE")]
        kek_file: Option<std::path::PathBuf>,
    },
    /// Stop trusting an old generation: its key is deleted, and the servers refuse its
    /// certificates from their next start. Refused while it has live certificates, unless
    /// --force (those agents are then refused until they ask for a new one without it).
    Retire {
        #[arg(long)]
        generation: u32,
        #[arg(long)]
        force: bool,
        #[arg(long, value_name = "FILE")]
        kek_file: Option<std::path::PathBuf>,
    },
}

/// Live certificates of each generation, now.
async fn live_counts(store: &Repositories) -> Result<Vec<(u32, u64)>> {
    let now = toolgate_domain::Clock::default().now_ms();
    Ok(store.certs.live_by_generation(now).await?)
}

fn live_of(counts: &[(u32, u64)], generation: u32) -> u64 {
    counts.iter().find(|(g, _)| *g == generation).map_or(0, |(_, n)| *n)
}

pub async fn run(store: &Repositories, command: CaCommand) -> Result<String> {
    let now = toolgate_domain::Clock::default().now_secs();
    match command {
        CaCommand::Status { kek_file } => {
            let vault = open_vault(store, kek_file).await?;
            let Some(ca) = AgentCa::load(&vault).await? else {
                bail!(
                    "this database has no agent CA yet: the first start with a key-encryption key makes one, or `toolgate ca import` brings your own"
                )
            };
            let counts = live_counts(store).await?;
            let mut out = String::new();
            for (i, g) in ca.trusted().iter().enumerate() {
                let role = if i == 0 { "signs" } else { "trusted" };
                let live = live_of(&counts, g.generation);
                out.push_str(&format!(
                    "generation {} ({role}): {} — {live} live certificate(s)\n",
                    g.generation, g.fingerprint
                ));
            }
            Ok(out)
        }
        CaCommand::Import { cert, key, kek_file } => {
            let read = |path: &std::path::Path| {
                std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
            };
            let (cert_pem, key_pem) = (read(&cert)?, read(&key)?);
            let vault = open_vault(store, kek_file).await?;
            let made = AgentCa::import(&vault, &cert_pem, &key_pem, now)
                .await
                .map_err(|e| anyhow::anyhow!("{}: {e}", cert.display()))?;
            Ok(format!("the CA of {} is generation 1 ({})\n", cert.display(), made.fingerprint))
        }
        CaCommand::Rotate { kek_file } => {
            let vault = open_vault(store, kek_file).await?;
            let made = AgentCa::rotate(&vault, now).await?;
            Ok(format!(
                "generation {} made ({}), cross-signed by generation {}: restart every replica, one at a time\n",
                made.generation,
                made.fingerprint,
                made.generation - 1
            ))
        }
        CaCommand::Retire { generation, force, kek_file } => {
            let vault = open_vault(store, kek_file).await?;
            let live = live_of(&live_counts(store).await?, generation);
            if live > 0 && !force {
                bail!(
                    "generation {generation} still has {live} live certificate(s): wait until their agents have renewed (toolgate ca status), or --force"
                );
            }
            AgentCa::retire(&vault, generation).await?;
            Ok(format!("generation {generation} retired: servers refuse its certificates from their next start\n"))
        }
    }
}

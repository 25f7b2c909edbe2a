//! `toolgate kek ...`: the key-encryption keys plugin secrets are sealed under
//! (docs/secrets.md). `generate` prints a new entry for the key file; `check` opens every
//! secret in the store with a key file, before an old version is retired or a replica is
//! started with a new file.

use anyhow::{Result, bail};
use clap::Subcommand;
use toolgate_store::Repositories;

use crate::sealing::keyring;
use crate::sealing::vault::{KeySource, Vault};

#[derive(Subcommand)]
pub enum KekCommand {
    /// Print a new key-file entry (`VERSION:BASE64` of 32 random bytes) to append to the key
    /// file of every replica; then rotate_kek activates it.
    Generate {
        #[arg(long)]
        version: u32,
    },
    /// Open every stored secret with this key file (or TOOLGATE_KEK): how many open, and
    /// which do not and why.
    Check {
        #[arg(long, value_name = "FILE")]
        kek_file: Option<std::path::PathBuf>,
    },
}

pub async fn run(store: Option<&Repositories>, command: KekCommand) -> Result<String> {
    match command {
        KekCommand::Generate { version } => {
            if version == 0 {
                bail!("versions start at 1");
            }
            Ok(format!("{}\n", keyring::generate(version)))
        }
        KekCommand::Check { kek_file } => {
            let Some(store) = store else { bail!("no store to check") };
            let vault = open_vault(store, kek_file).await?;
            let (opened, failed) = vault.check_all().await?;
            let mut out = format!("{opened} secret(s) open with this key file\n");
            for (name, why) in &failed {
                out.push_str(&format!("does not open: {name}: {why}\n"));
            }
            if !failed.is_empty() {
                bail!("{out}{} secret(s) do not open", failed.len());
            }
            Ok(out)
        }
    }
}

/// The vault of `store` opened with `kek_file` (or TOOLGATE_KEK): what every command that
/// reads a sealed secret needs.
pub async fn open_vault(store: &Repositories, kek_file: Option<std::path::PathBuf>) -> Result<Vault> {
    let source = match (kek_file, std::env::var("TOOLGATE_KEK").ok()) {
        (Some(path), _) => KeySource::File(path),
        (None, Some(text)) => KeySource::Variable(text),
        (None, None) => bail!("give the key file: --kek-file FILE (or TOOLGATE_KEK)"),
    };
    let now = toolgate_domain::Clock::default().now_secs();
    Ok(Vault::open(source, store.secrets.clone(), now).await?)
}

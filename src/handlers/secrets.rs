//! Plugin secrets and the key-encryption key (docs/secrets.md): write-only values sealed by
//! the vault. Nothing here answers a value; audit rows name the secret and its version.

use serde_json::json;
use toolgate_domain::{ToolError, ToolOutput, ToolResult};

use super::pages::Pager;
use crate::args;
use crate::sealing::vault::VaultError;
use crate::services::ToolContext;

/// Rows a rewrap reads at a time when the call does not say.
const REWRAP_BATCH: usize = 100;

fn refused(e: VaultError) -> ToolError {
    match e {
        VaultError::Store(e) => ToolError::Store(e),
        VaultError::NoKek => ToolError::Refused {
            message: e.to_string(),
            remediation: "an operator makes a key file (toolgate kek generate --version 1 > kek.txt), gives it to every replica with --kek-file, and restarts".into(),
        },
        VaultError::NothingToRotate { .. } => ToolError::Refused {
            message: e.to_string(),
            remediation: "append the new version to the key file on every replica, then call rotate_kek again".into(),
        },
        VaultError::Conflict(_) => ToolError::Refused { message: e.to_string(), remediation: "call again".into() },
        other => ToolError::Refused {
            message: other.to_string(),
            remediation: "compare the key file with the one the other replicas use (get_kek_status shows fingerprints)".into(),
        },
    }
}

pub async fn set_plugin_secret(ctx: &ToolContext, args: args::SetPluginSecret) -> ToolResult {
    let services = ctx.services();
    let now = services.clock().now_secs();
    let meta = services.vault().set(&args.plugin, &args.key, &args.value, &ctx.principal().name, now).await.map_err(refused)?;
    Ok(ToolOutput::Structured(json!(meta)))
}

/// Deleting a secret that is already absent is success with `changed: false`.
pub async fn delete_plugin_secret(ctx: &ToolContext, args: args::DeletePluginSecret) -> ToolResult {
    if args.plugin == crate::sealing::vault::INTERNAL {
        return Err(ToolError::Refused {
            message: format!("`{}` holds the server's own keys (the agent CA's): no tool deletes them", args.plugin),
            remediation: "docs/trust.md says how the CA is rotated".into(),
        });
    }
    let deleted = ctx.services().vault().delete(&args.plugin, &args.key).await.map_err(refused)?;
    Ok(ToolOutput::Structured(json!({
        "plugin": args.plugin, "key": args.key, "changed": deleted.is_some(),
        "deleted_version": deleted.map(|d| d.version),
    })))
}

pub async fn list_plugin_secrets(ctx: &ToolContext, args: args::ListPluginSecrets) -> ToolResult {
    let pager = Pager::of(&args, usize::MAX)?;
    let plugin = args.plugin.as_deref().filter(|p| !p.is_empty());
    let (secrets, count) = pager.window(ctx.services().vault().list(plugin).await.map_err(refused)?);
    let secrets = secrets.iter().map(|secret| json!(secret)).collect();
    pager.answer(ctx, json!({"count": count}), "secrets", secrets, count)
}

pub async fn get_kek_status(ctx: &ToolContext, _args: args::GetKekStatus) -> ToolResult {
    let status = ctx.services().vault().status().await.map_err(refused)?;
    Ok(ToolOutput::Structured(json!(status)))
}

pub async fn rotate_kek(ctx: &ToolContext, _args: args::RotateKek) -> ToolResult {
    let services = ctx.services();
    let vault = services.vault();
    let activated = vault.rotate(&ctx.principal().name, services.clock().now_secs()).await.map_err(refused)?;
    let awaiting = vault.status().await.map_err(refused)?.awaiting_rewrap;
    Ok(ToolOutput::Structured(json!({
        "activated_version": activated.version, "fingerprint": activated.fingerprint, "awaiting_rewrap": awaiting,
    })))
}

pub async fn rewrap_secrets(ctx: &ToolContext, args: args::RewrapSecrets) -> ToolResult {
    let batch = args.batch_size.map_or(REWRAP_BATCH, |b| b as usize);
    let limit = args.max_secrets.map_or(usize::MAX, |m| m as usize);
    let run = ctx.services().vault().rewrap(batch, limit).await.map_err(refused)?;
    Ok(ToolOutput::Structured(json!(run)))
}

//! Upload grants (docs/uploads.md): minted for one agent the caller may see, read and revoked
//! within the caller's reach (in the store query). The content is never answered here, only
//! its metadata and a short preview, which is agent data (the tools are `agentData`).

use serde_json::{Value, json};
use toolgate_domain::uploads::{NewGrant, UploadGrant};
use toolgate_domain::{ToolError, ToolOutput, ToolResult};

use super::confined;
use super::pages::{EVERY_ROW, Pager};
use crate::args;
use crate::services::ToolContext;

/// The instruction that uses a grant (instructions.yaml).
const COLLECTING_INSTRUCTION: &str = "collect_files";
/// Grants listed when the call does not say.
const DEFAULT_LISTED: usize = 100;

/// A grant as every tool shows it.
pub(crate) fn shown(grant: &UploadGrant, now_ms: i64) -> Value {
    let minted = &grant.minted;
    json!({
        "grant_id": minted.grant_id, "agent_id": minted.agent_id, "state": grant.state_at(now_ms),
        "source_path": minted.source_path, "uploaded_path": grant.uploaded_path,
        "expected_sha256": minted.expected_sha256, "retention_class": minted.retention_class,
        "max_bytes": minted.max_bytes, "created_at_ms": minted.created_at_ms, "created_by": minted.created_by,
        "expires_at_ms": minted.expires_at_ms, "finished_at_ms": grant.finished_at_ms,
        "kind": grant.kind.map(|k| k.as_str()), "sha256": grant.sha256, "size_bytes": grant.size_bytes,
        "failure": grant.failure, "revoked_by": grant.revoked_by, "retained_until_ms": grant.retained_until_ms(),
        "content_kept": grant.content_kept, "preview": grant.preview,
    })
}

/// A path the agent may read, normalised (`.`, `..` and repeated slashes resolved as text):
/// under its log root, as `log_tail`'s. `/var/log/../etc/shadow` is `/etc/shadow`, and refused
/// here, at mint time (the agent checks again, resolved, and refuses its own state however
/// spelled; this fails early and clearly, and the grant keeps the normalised path).
fn checked_path(path: &str) -> Result<String, ToolError> {
    let root = toolgate_agent::plugins::LOG_ROOT;
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => drop(parts.pop()),
            name => parts.push(name),
        }
    }
    let normalised = format!("/{}", parts.join("/"));
    let under_root = normalised == root || normalised.strip_prefix(root).is_some_and(|rest| rest.starts_with('/'));
    if !path.starts_with('/') || !under_root || path.contains('\0') {
        let resolved = match normalised == path {
            true => String::new(),
            false => format!(" (`{normalised}` once `.` and `..` are resolved)"),
        };
        return Err(ToolError::InvalidArguments(format!(
            "source_path `{path}`{resolved} must be an absolute path under {root} on the agent (e.g. {root}/syslog): agents send only what log_tail may read"
        )));
    }
    Ok(normalised)
}

pub async fn mint_upload_grant(ctx: &ToolContext, args: args::MintUploadGrant) -> ToolResult {
    let services = ctx.services();
    let limits = services.upload_limits();
    confined::one_agent(ctx, &args.agent_id).await?;
    let source_path = args.source_path.as_deref().map(checked_path).transpose()?;
    let max_bytes = args.declared_max_size;
    if max_bytes as u64 > limits.max_bytes {
        return Err(ToolError::Refused {
            message: format!("declared_max_size {max_bytes} is more than this server allows, {} bytes", limits.max_bytes),
            remediation: format!("ask for at most {} bytes (the operator sets uploads.max_size_bytes)", limits.max_bytes),
        });
    }
    let ttl_secs = args.ttl_secs.unwrap_or(limits.default_ttl_secs);
    if ttl_secs > limits.max_ttl_secs {
        return Err(ToolError::Refused {
            message: format!("ttl_secs {ttl_secs} is longer than this server allows, {} s", limits.max_ttl_secs),
            remediation: format!("ask for at most {} s (the operator sets uploads.max_ttl)", limits.max_ttl_secs),
        });
    }
    let catalogue = services.catalogue();
    let class = args.retention_class.or_else(|| crate::deployment::default_retention_class(catalogue)).unwrap_or_default();
    let Some(&retention_secs) = limits.retention.get(&class) else {
        return Err(ToolError::Refused {
            message: format!("the retention class `{class}` has no duration on this server"),
            remediation: format!("an operator sets uploads.retention.{class} in the deployment settings"),
        });
    };
    let now = services.clock().now_ms();
    let grant = NewGrant {
        grant_id: toolgate_domain::secrets::random_hex::<16>(),
        agent_id: args.agent_id.clone(),
        source_path,
        expected_sha256: args.expected_sha256,
        retention_class: class,
        retention_secs,
        max_bytes,
        created_at_ms: now,
        expires_at_ms: now + ttl_secs * 1000,
        created_by: ctx.principal().name.clone(),
    };
    let uploads = &services.repositories().uploads;
    uploads.mint_grant(&grant).await?;
    let minted = uploads.grant(&grant.grant_id, ctx.reach()).await?.ok_or_else(|| {
        ToolError::NotFound(format!("agent `{}` left your management groups meanwhile", grant.agent_id))
    })?;
    Ok(ToolOutput::Structured(json!({
        "grant": shown(&minted, now),
        "collect_with": {
            "definition": COLLECTING_INSTRUCTION, "params": {"grant_id": grant.grant_id}, "agent_ids": [grant.agent_id],
        },
    })))
}

pub async fn list_upload_grants(ctx: &ToolContext, args: args::ListUploadGrants) -> ToolResult {
    let services = ctx.services();
    let pager = Pager::of(&args, DEFAULT_LISTED)?;
    let grants = services.repositories().uploads.grants(ctx.reach(), args.agent_id.as_deref(), EVERY_ROW).await?;
    let (grants, count) = pager.window(grants);
    let now = services.clock().now_ms();
    let shown: Vec<Value> = grants.iter().map(|g| shown(g, now)).collect();
    pager.answer(ctx, json!({"count": count}), "grants", shown, count)
}

pub async fn revoke_upload_grant(ctx: &ToolContext, args: args::RevokeUploadGrant) -> ToolResult {
    let services = ctx.services();
    let now = services.clock().now_ms();
    let revoked = services
        .repositories()
        .uploads
        .revoke_grant(&args.grant_id, ctx.reach(), &ctx.principal().name, now)
        .await?;
    let Some((grant, changed)) = revoked else {
        return Err(ToolError::NotFound(format!(
            "no upload grant `{}` among your agents' (list_upload_grants lists them)",
            args.grant_id
        )));
    };
    Ok(ToolOutput::Structured(json!({"grant": shown(&grant, now), "changed": changed})))
}

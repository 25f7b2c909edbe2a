//! Engine principals: automation's identities, each owned by a person (docs/identities.md).
//! Every change leaves an `engine.*` audit row (target type `Principal`) with what it was and
//! what it is, beside the call's own row.

use serde_json::{Value, json};
use toolgate_domain::audit::{AuditEvent, AuditOutcome, TargetType};
use toolgate_domain::engines::{EngineRecord, NewEngine};
use toolgate_domain::records::Change;
use toolgate_domain::tokens::PrincipalRecord;
use toolgate_domain::{ToolError, ToolOutput, ToolResult};
use toolgate_store::RevokeEngine;

use super::pages::Pager;
use crate::args;
use crate::identities::{self, engine_id, refused};
use crate::services::ToolContext;

async fn audit_change(ctx: &ToolContext, action: &str, principal_id: &str, detail: String) {
    let event = AuditEvent::new(ctx.services().clock().now_ms(), action, AuditOutcome::Success)
        .by(ctx.caller())
        .target(TargetType::Principal, principal_id.to_string())
        .detail(detail)
        .correlation(ctx.correlation_id());
    ctx.services().audit().record_durable(event).await;
}

async fn engine(ctx: &ToolContext, id: &str) -> Result<(EngineRecord, PrincipalRecord), ToolError> {
    identities::engine(ctx.services().repositories(), id).await
}

async fn engine_json(ctx: &ToolContext, record: &EngineRecord, principal: &PrincipalRecord) -> Result<Value, ToolError> {
    let services = ctx.services();
    let now = services.clock().now_secs();
    let tokens = services.credentials().tokens(Some(&record.principal_id)).await?;
    let credentials: Vec<Value> = tokens
        .iter()
        .map(|t| {
            json!({"token_id": t.id, "name": t.name, "tier": t.tier, "expires_at": t.expires_at,
                   "state": t.state(now).label()})
        })
        .collect();
    let quota = record.quota(services.catalogue().engines.quota);
    let group_roles: Vec<Value> =
        principal.group_roles.iter().map(|g| json!({"group_id": g.group_id, "role": g.role})).collect();
    Ok(json!({
        "principal_id": record.principal_id, "display_name": record.display_name, "owner": record.owner,
        "justification": record.justification, "classification": record.classification,
        "created_at": record.created_at, "created_by": record.created_by, "revoked_at": record.revoked_at,
        "revoke_reason": record.revoke_reason, "superseded_by": record.superseded_by,
        "quota": {"requests_per_minute": quota.requests_per_minute, "concurrent_requests": quota.concurrent_requests},
        "roles": principal.roles, "group_roles": group_roles, "credentials": credentials,
    }))
}

pub async fn create_engine_principal(ctx: &ToolContext, args: args::CreateEnginePrincipal) -> ToolResult {
    let services = ctx.services();
    let new = NewEngine {
        principal_id: &args.principal_id,
        display_name: &args.display_name,
        owner: &args.owner_username,
        justification: &args.justification,
        classification: &args.classification,
        requests_per_minute: args.requests_per_minute.map(|n| n as u32),
        concurrent_requests: args.concurrent_requests.map(|n| n as u32),
        created_by: &ctx.principal().name,
        now: services.clock().now_secs(),
    };
    let record = services.repositories().engines.create_engine(new).await?.map_err(refused)?;
    audit_change(ctx, "engine.create", &record.principal_id, format!("created, owned by {}", record.owner)).await;
    let (record, principal) = engine(ctx, &record.principal_id).await?;
    Ok(ToolOutput::Structured(engine_json(ctx, &record, &principal).await?))
}

pub async fn list_engine_principals(ctx: &ToolContext, args: args::ListEnginePrincipals) -> ToolResult {
    let services = ctx.services();
    let pager = Pager::of(&args, usize::MAX)?;
    let records = services.repositories().engines.engines(args.include_revoked.unwrap_or(true)).await?;
    // Only this page's engines are looked up.
    let (records, count) = pager.window(records);
    let mut listed = Vec::with_capacity(records.len());
    for record in &records {
        if let Some(principal) = services.credentials().principal(&record.principal_id).await? {
            listed.push(engine_json(ctx, record, &principal).await?);
        }
    }
    pager.answer(ctx, json!({"count": count}), "engine_principals", listed, count)
}

pub async fn get_engine_principal(ctx: &ToolContext, args: args::GetEnginePrincipal) -> ToolResult {
    let (record, principal) = engine(ctx, &args.principal_id).await?;
    Ok(ToolOutput::Structured(engine_json(ctx, &record, &principal).await?))
}

pub async fn revoke_engine_principal(ctx: &ToolContext, args: args::RevokeEnginePrincipal) -> ToolResult {
    let services = ctx.services();
    let revoke = RevokeEngine {
        principal_id: &args.principal_id,
        reason: args.reason.as_deref(),
        superseded_by: args.superseded_by.as_deref(),
        now: services.clock().now_secs(),
    };
    let revoked = services.repositories().engines.revoke_engine(revoke).await?.map_err(refused)?;
    // Through the credential cache, so this server refuses the credentials at once.
    services.credentials().forget_cached();
    if revoked.changed {
        let detail = format!(
            "revoked with {} live credential(s); reason: {}",
            revoked.credentials_revoked,
            args.reason.as_deref().unwrap_or("none given")
        );
        audit_change(ctx, "engine.revoke", &args.principal_id, detail).await;
    }
    Ok(ToolOutput::Structured(json!({
        "principal_id": args.principal_id, "changed": revoked.changed,
        "credentials_revoked": revoked.credentials_revoked, "revoked_at": revoked.record.revoked_at,
    })))
}

pub async fn mint_engine_credential(ctx: &ToolContext, args: args::MintEngineCredential) -> ToolResult {
    let services = ctx.services();
    let now = services.clock().now_secs();
    let id = &args.principal_id;
    let asked = identities::Credential {
        name: args.name.as_deref(),
        ttl_days: args.ttl_days,
        tier: args.tier.as_deref(),
        toolsets: args.toolsets.as_deref(),
    };
    let (token, secret) = identities::mint(services.repositories(), services.catalogue(), id, asked, now).await?;
    let tier = token.tier.clone().unwrap_or_default();
    let detail = format!("credential {} minted, tier {tier}, expires {}", token.id, token.expires_at);
    audit_change(ctx, "engine.mint_credential", id, detail).await;
    Ok(ToolOutput::Structured(json!({
        "principal_id": id, "token_id": token.id, "secret": secret, "tier": tier, "toolsets": token.toolsets,
        "expires_at": token.expires_at, "note": "the secret is shown only now",
    })))
}

pub async fn transfer_engine_principal_owner(ctx: &ToolContext, args: args::TransferEnginePrincipalOwner) -> ToolResult {
    let engines = &ctx.services().repositories().engines;
    let (previous, after) = engines.transfer_engine(&args.principal_id, &args.new_owner).await?.map_err(refused)?;
    let changed = previous != after.owner;
    if changed {
        audit_change(ctx, "engine.transfer_owner", &args.principal_id, format!("owner {previous} -> {}", after.owner))
            .await;
    }
    Ok(ToolOutput::Structured(json!({
        "principal_id": args.principal_id, "previous_owner": previous, "owner": after.owner, "changed": changed,
    })))
}

fn change(ctx: &ToolContext) -> Change<'_> {
    Change { at: ctx.services().clock().now_secs(), by: &ctx.principal().name }
}

/// The role change's answer, and its audit row when it changed anything (`held`: how the
/// role stands now, for the row).
async fn role_change(ctx: &ToolContext, change: RoleChange<'_>, held: &str) -> ToolResult {
    let RoleChange { action, id, role, group_id, changed } = change;
    if changed {
        let on = group_id.map_or("fleet-wide".to_string(), |g| format!("on group {g}"));
        audit_change(ctx, action, id, format!("{role} {held} {on}")).await;
    }
    Ok(ToolOutput::Structured(json!({"principal_id": id, "role": role, "group_id": group_id, "changed": changed})))
}

struct RoleChange<'a> {
    action: &'a str,
    id: &'a str,
    role: &'a str,
    group_id: Option<&'a str>,
    changed: bool,
}

pub async fn assign_engine_role(ctx: &ToolContext, args: args::AssignEngineRole) -> ToolResult {
    let services = ctx.services();
    let (id, group) = (engine_id(&args.principal_id), args.group_id.as_deref());
    let changed =
        identities::assign_role(services.repositories(), services.catalogue(), &id, &args.role, group, change(ctx)).await?;
    let change = RoleChange { action: "engine.role_assign", id: &id, role: &args.role, group_id: group, changed };
    role_change(ctx, change, "now held").await
}

pub async fn unassign_engine_role(ctx: &ToolContext, args: args::UnassignEngineRole) -> ToolResult {
    let services = ctx.services();
    let (id, group) = (engine_id(&args.principal_id), args.group_id.as_deref());
    let now = services.clock().now_secs();
    let changed = identities::unassign_role(services.repositories(), &id, &args.role, group, now).await?;
    let change = RoleChange { action: "engine.role_unassign", id: &id, role: &args.role, group_id: group, changed };
    role_change(ctx, change, "no longer held").await
}

pub async fn list_engine_roles(ctx: &ToolContext, args: args::ListEngineRoles) -> ToolResult {
    let id = engine_id(&args.principal_id);
    let (_, principal) = engine(ctx, &id).await?;
    let group_roles: Vec<Value> =
        principal.group_roles.iter().map(|g| json!({"group_id": g.group_id, "role": g.role})).collect();
    Ok(ToolOutput::Structured(json!({"principal_id": id, "roles": principal.roles, "group_roles": group_roles})))
}

pub async fn audit_engine_no_admin(ctx: &ToolContext, args: args::AuditEngineNoAdmin) -> ToolResult {
    let services = ctx.services();
    let catalogue = services.catalogue();
    let records = services.repositories().engines.engines(args.include_revoked.unwrap_or(true)).await?;
    let mut violations = Vec::new();
    for record in &records {
        let Some(principal) = services.credentials().principal(&record.principal_id).await? else { continue };
        let held = principal.roles.iter().map(|r| (r.as_str(), None));
        let on_groups = principal.group_roles.iter().map(|g| (g.role.as_str(), Some(g.group_id.as_str())));
        for (role, group_id) in held.chain(on_groups) {
            for (grant, administrator_permission) in catalogue.administrator_grants(role) {
                violations.push(json!({
                    "principal_id": record.principal_id, "role": role, "group_id": group_id, "grant": grant,
                    "administrator_permission": administrator_permission, "revoked": record.is_revoked(),
                }));
            }
        }
    }
    Ok(ToolOutput::Structured(json!({"checked": records.len(), "violations": violations})))
}

pub async fn rotate_engine_credential(ctx: &ToolContext, args: args::RotateEngineCredential) -> ToolResult {
    let services = ctx.services();
    let (id, overlap_days) = (&args.principal_id, args.overlap_days.unwrap_or(7));
    let now = services.clock().now_secs();
    let rotated = identities::rotate(services.repositories(), id, args.token_id.as_deref(), overlap_days, now).await?;
    let identities::Rotated { predecessor, successor, secret, overlap_ends_at } = rotated;
    let detail = format!("credential {} rotated to {}; overlap until {overlap_ends_at}", predecessor.id, successor.id);
    audit_change(ctx, "engine.rotate_credential", id, detail).await;
    Ok(ToolOutput::Structured(json!({
        "principal_id": id, "predecessor_id": predecessor.id, "successor_id": successor.id,
        "secret": secret, "tier": successor.tier, "expires_at": successor.expires_at, "overlap_ends_at": overlap_ends_at,
        "next_step": "switch the automation to the new secret, then confirm_engine_rotation with successor_id and the secret; the old credential stops at overlap_ends_at either way",
    })))
}

pub async fn confirm_engine_rotation(ctx: &ToolContext, args: args::ConfirmEngineRotation) -> ToolResult {
    let services = ctx.services();
    let now = services.clock().now_secs();
    // The gate checked that the rotation is pending and the secret the successor's
    // (tools.yaml `precondition`); the store checks it again, atomically.
    let confirmed = services.credentials().confirm_rotation(&args.token_id, &args.secret, &args.principal_id, now).await?;
    let Some(predecessor) = confirmed else {
        return Err(ToolError::Refused {
            message: format!("the rotation of {} to {} is no longer pending: nothing changed", args.principal_id, args.token_id),
            remediation: "get_engine_principal shows its credentials; rotate again if the old one is still live".into(),
        });
    };
    let detail = format!("rotation to {} confirmed; {predecessor} revoked", args.token_id);
    audit_change(ctx, "engine.rotation_confirmed", &args.principal_id, detail).await;
    Ok(ToolOutput::Structured(json!({
        "principal_id": args.principal_id, "successor_id": args.token_id, "revoked_predecessor_id": predecessor, "confirmed": true,
    })))
}

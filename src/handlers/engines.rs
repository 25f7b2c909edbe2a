//! Engine principals: automation's identities, each owned by a person (docs/identities.md).
//! Every change leaves an `engine.*` audit row (target type `Principal`) with what it was and
//! what it is, beside the call's own row.

use serde_json::{Value, json};
use toolgate_domain::audit::{AuditEvent, AuditOutcome, TargetType};
use toolgate_domain::engines::{ENGINE_PREFIX, EngineRecord, EngineRefusal, NewEngine, PrincipalKind};
use toolgate_domain::records::Change;
use toolgate_domain::tokens::{MAX_TOKEN_DAYS, NewToken, PrincipalRecord, TokenRecord, TokenState};
use toolgate_domain::{ToolError, ToolOutput, ToolResult};
use toolgate_policy::did_you_mean;
use toolgate_store::RevokeEngine;

use crate::args;
use crate::services::ToolContext;

fn refused(refusal: EngineRefusal) -> ToolError {
    match refusal {
        EngineRefusal::Unknown(_) | EngineRefusal::UnknownOwner(_) => ToolError::NotFound(refusal.to_string()),
        other => ToolError::InvalidArguments(other.to_string()),
    }
}

async fn audit_change(ctx: &ToolContext, action: &str, principal_id: &str, detail: String) {
    let event = AuditEvent::new(ctx.services().clock().now_ms(), action, AuditOutcome::Success)
        .by(ctx.caller())
        .target(TargetType::Principal, principal_id.to_string())
        .detail(detail)
        .correlation(ctx.correlation_id());
    ctx.services().audit().record_durable(event).await;
}

/// The reference names an engine principal by its slug alone in the role tools; both spell
/// the same one.
fn engine_id(given: &str) -> String {
    match given.starts_with(ENGINE_PREFIX) {
        true => given.to_string(),
        false => format!("{ENGINE_PREFIX}{given}"),
    }
}

/// The engine principal `id` names, as stored, and its principal row (roles).
async fn engine(ctx: &ToolContext, id: &str) -> Result<(EngineRecord, PrincipalRecord), ToolError> {
    let services = ctx.services();
    let unknown = || refused(EngineRefusal::Unknown(id.to_string()));
    let record = services.repositories().engines.engine(id).await?.ok_or_else(unknown)?;
    let principal = services.credentials().principal(id).await?.ok_or_else(unknown)?;
    Ok((record, principal))
}

/// An engine principal that may still be changed: not revoked.
async fn live_engine(ctx: &ToolContext, id: &str) -> Result<(EngineRecord, PrincipalRecord), ToolError> {
    let (record, principal) = engine(ctx, id).await?;
    match record.is_revoked() {
        true => Err(refused(EngineRefusal::Revoked(id.to_string()))),
        false => Ok((record, principal)),
    }
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
    let records = services.repositories().engines.engines(args.include_revoked.unwrap_or(true)).await?;
    let mut listed = Vec::with_capacity(records.len());
    for record in &records {
        if let Some(principal) = services.credentials().principal(&record.principal_id).await? {
            listed.push(engine_json(ctx, record, &principal).await?);
        }
    }
    Ok(ToolOutput::Structured(json!({"count": listed.len(), "engine_principals": listed})))
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
    let catalogue = services.catalogue();
    live_engine(ctx, &args.principal_id).await?;
    let tier = match args.tier.as_deref().or(catalogue.engines.credential_tier) {
        Some(tier) if catalogue.tier(tier).is_some() => tier.to_string(),
        Some(tier) => {
            return Err(ToolError::InvalidArguments(format!(
                "no tier `{tier}`; {}",
                did_you_mean(tier, catalogue.tier_names())
            )));
        }
        None => {
            return Err(ToolError::InvalidArguments(
                "give `tier`: policy.yaml names no engines.credential_tier to mint with".into(),
            ));
        }
    };
    let days = args.ttl_days.unwrap_or(MAX_TOKEN_DAYS).clamp(1, MAX_TOKEN_DAYS);
    let now = services.clock().now_secs();
    let name = args.name.clone().unwrap_or_else(|| format!("{} credential", args.principal_id));
    let new = NewToken { principal: &args.principal_id, tier: Some(&tier), name: &name, now, expires_at: now + days * 86_400 };
    let (token, secret) = services.credentials().create_token(new).await?;
    let detail = format!("credential {} minted, tier {tier}, expires {}", token.id, token.expires_at);
    audit_change(ctx, "engine.mint_credential", &args.principal_id, detail).await;
    Ok(ToolOutput::Structured(json!({
        "principal_id": args.principal_id, "token_id": token.id, "secret": secret, "tier": tier,
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

/// A role an engine principal may be given: declared, and not human-only.
fn ensure_holdable(ctx: &ToolContext, principal_id: &str, role: &str) -> Result<(), ToolError> {
    let catalogue = ctx.services().catalogue();
    if !catalogue.role_names().any(|r| r == role) {
        return Err(ToolError::InvalidArguments(format!(
            "no role `{role}` in policy.yaml; {}",
            did_you_mean(role, catalogue.role_names())
        )));
    }
    match catalogue.engines.refusal_to_hold(PrincipalKind::Engine, principal_id, role) {
        Some(message) => Err(ToolError::Refused {
            message,
            remediation: "give it a role that grants only what the automation needs (docs/identities.md)".into(),
        }),
        None => Ok(()),
    }
}

fn change(ctx: &ToolContext) -> Change<'_> {
    Change { at: ctx.services().clock().now_secs(), by: &ctx.principal().name }
}

fn role_change(id: &str, role: &str, group_id: Option<&str>, changed: bool) -> ToolResult {
    Ok(ToolOutput::Structured(json!({"principal_id": id, "role": role, "group_id": group_id, "changed": changed})))
}

pub async fn assign_engine_role(ctx: &ToolContext, args: args::AssignEngineRole) -> ToolResult {
    let id = engine_id(&args.principal_id);
    let (_, principal) = live_engine(ctx, &id).await?;
    ensure_holdable(ctx, &id, &args.role)?;
    let credentials = ctx.services().credentials();
    let changed = match args.group_id.as_deref() {
        Some(group) => credentials
            .assign_group_role(&id, group, &args.role, change(ctx))
            .await?
            .map_err(|refusal| ToolError::NotFound(refusal.to_string()))?,
        None if principal.roles.contains(&args.role) => false,
        None => {
            let mut roles = principal.roles.clone();
            roles.push(args.role.clone());
            credentials.put_principal(&id, &roles, ctx.services().clock().now_secs()).await?;
            true
        }
    };
    if changed {
        let on = args.group_id.as_deref().map_or("fleet-wide".to_string(), |g| format!("on group {g}"));
        audit_change(ctx, "engine.role_assign", &id, format!("{} now held {on} (was not)", args.role)).await;
    }
    role_change(&id, &args.role, args.group_id.as_deref(), changed)
}

pub async fn unassign_engine_role(ctx: &ToolContext, args: args::UnassignEngineRole) -> ToolResult {
    let id = engine_id(&args.principal_id);
    let (_, principal) = engine(ctx, &id).await?;
    let credentials = ctx.services().credentials();
    let changed = match args.group_id.as_deref() {
        Some(group) => credentials.unassign_group_role(&id, group, &args.role).await?,
        None if !principal.roles.contains(&args.role) => false,
        None => {
            let roles: Vec<String> = principal.roles.iter().filter(|r| **r != args.role).cloned().collect();
            credentials.put_principal(&id, &roles, ctx.services().clock().now_secs()).await?;
            true
        }
    };
    if changed {
        let on = args.group_id.as_deref().map_or("fleet-wide".to_string(), |g| format!("on group {g}"));
        audit_change(ctx, "engine.role_unassign", &id, format!("{} no longer held {on}", args.role)).await;
    }
    role_change(&id, &args.role, args.group_id.as_deref(), changed)
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
    let credentials = services.credentials();
    let now = services.clock().now_secs();
    live_engine(ctx, &args.principal_id).await?;
    if let Some(pending) = credentials.rotations(&args.principal_id).await?.into_iter().find(|r| r.is_pending(now)) {
        return Err(ToolError::Refused {
            message: format!(
                "a rotation of {} is pending: {} replaces {} until {} (Unix seconds)",
                args.principal_id, pending.successor_id, pending.predecessor_id, pending.overlap_ends_at
            ),
            remediation: "confirm it (confirm_engine_rotation with the successor's token_id and secret) or let its overlap end".into(),
        });
    }
    let tokens = credentials.tokens(Some(&args.principal_id)).await?;
    let live = |t: &&TokenRecord| t.state(now) == TokenState::Active;
    let predecessor = match args.token_id.as_deref() {
        Some(id) => tokens.iter().filter(live).find(|t| t.id == id).ok_or_else(|| {
            ToolError::NotFound(format!("{} holds no live credential `{id}` (get_engine_principal lists them)", args.principal_id))
        })?,
        None => tokens.iter().filter(live).max_by_key(|t| (t.created_at, t.id.clone())).ok_or_else(|| {
            ToolError::NotFound(format!("{} holds no live credential to rotate: mint one (mint_engine_credential)", args.principal_id))
        })?,
    };
    // The overlap never outlives the old credential; the new one lives as long as it did.
    let overlap = (args.overlap_days.unwrap_or(7) * 86_400).min(predecessor.expires_at - now);
    let lifetime = (predecessor.expires_at - predecessor.created_at).clamp(86_400, MAX_TOKEN_DAYS * 86_400);
    let (successor, secret) = credentials.rotate_token(predecessor, overlap, now + lifetime, now).await?;
    let detail = format!("credential {} rotated to {}; overlap until {}", predecessor.id, successor.id, now + overlap);
    audit_change(ctx, "engine.rotate_credential", &args.principal_id, detail).await;
    Ok(ToolOutput::Structured(json!({
        "principal_id": args.principal_id, "predecessor_id": predecessor.id, "successor_id": successor.id,
        "secret": secret, "tier": successor.tier, "expires_at": successor.expires_at, "overlap_ends_at": now + overlap,
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

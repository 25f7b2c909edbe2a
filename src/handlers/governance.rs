//! Governance: approvals (read-only over MCP: only people approve), the audit log, the
//! caller's own API tokens, permission checks and management groups.

use serde_json::{Value, json};
use toolgate_domain::audit::AuditFilter;
use toolgate_domain::engines::PrincipalKind;
use toolgate_domain::groups::Reader;
use toolgate_domain::tokens::{MAX_TOKEN_DAYS, MAX_TOKEN_SECS, NewToken, TokenRecord, TokenState};
use toolgate_domain::{ToolError, ToolOutput, ToolResult};
use toolgate_policy::Decision;

use super::pages::Pager;
use crate::args;
use crate::registry::ToolId;
use crate::services::ToolContext;

/// MCP sessions are not interactive: nobody can prove a human is at the keyboard.
const NON_INTERACTIVE: &str = "approver_assurance_required:non_interactive_session";
/// Automation never approves, wherever it asks.
const ENGINE: &str = "approver_assurance_required:engine_principal";

pub async fn list_pending_approvals(ctx: &ToolContext, args: args::ListPendingApprovals) -> ToolResult {
    let pager = Pager::of(&args, usize::MAX)?;
    let status = args.status.unwrap_or_else(|| "pending".into());
    // A reviewer reads the tickets its grant covers (all of them fleet-wide, those within its
    // groups on groups); everyone reads their own, another principal's reading as if there
    // were none.
    let services = ctx.services();
    let reviewing = services.reviewing(ctx.principal()).await?;
    let approvals = reviewing.tickets(services.approvals(), Some(&status), args.submitted_by.as_deref(), 1000).await?;
    let (approvals, count) = pager.window(approvals);
    let approvals: Vec<Value> = approvals
        .into_iter()
        .map(|a| {
            json!({"approval_id": a.id, "tool": a.tool, "submitter": a.submitter, "status": a.status.label(),
                   "arguments": a.canonical_args, "submitted_at": a.submitted_at, "expires_at": a.expires_at, "reviewer": a.reviewer})
        })
        .collect();
    pager.answer(ctx, json!({"count": count}), "approvals", approvals, count)
}

pub async fn get_approval(ctx: &ToolContext, args: args::GetApproval) -> ToolResult {
    let services = ctx.services();
    let ticket = services.approvals().approval(&args.approval_id).await?;
    // Another principal's ticket, outside a reviewer's grant, reads exactly like an unknown id.
    let seen = match ticket {
        Some(ticket) => services.reviewing(ctx.principal()).await?.sees(&ticket).await?.then_some(ticket),
        None => None,
    };
    let Some(a) = seen else {
        return Err(ToolError::NotFound(format!(
            "no approval `{}`: list_pending_approvals lists those you may read",
            args.approval_id
        )));
    };
    Ok(ToolOutput::Structured(json!({
        "approval_id": a.id, "tool": a.tool, "submitter": a.submitter, "status": a.status.label(),
        "arguments": a.canonical_args, "submitted_at": a.submitted_at, "expires_at": a.expires_at,
        "reviewer": a.reviewer, "reviewed_at": a.reviewed_at, "review_comment": a.review_comment,
        "consumed_at": a.consumed_at,
    })))
}

fn refuse_review(ctx: &ToolContext, what: &str) -> ToolResult {
    if ctx.principal().kind == PrincipalKind::Engine {
        return Err(ToolError::Refused {
            message: format!("{ENGINE}: an engine principal's approvals cannot be {what}, here or anywhere"),
            remediation: "a person approves or rejects on the approver's console (/console)".into(),
        });
    }
    Err(ToolError::Refused {
        message: format!("{NON_INTERACTIVE}: approvals cannot be {what} over MCP"),
        remediation: "a person approves or rejects on the approver's console (/console), signed in with a second factor; no token can decide".into(),
    })
}

pub async fn approve_request(ctx: &ToolContext, _args: args::ApproveRequest) -> ToolResult {
    refuse_review(ctx, "approved")
}

pub async fn reject_request(ctx: &ToolContext, _args: args::RejectRequest) -> ToolResult {
    refuse_review(ctx, "rejected")
}

pub async fn query_audit_log(ctx: &ToolContext, args: args::QueryAuditLog) -> ToolResult {
    // Walked by row id, newest first: this call's own row, and every other written while a
    // client pages, shifts nothing.
    let pager = Pager::of(&args, 100)?;
    // A reader whose grant reaches only some groups reads its own calls and the rows about
    // its agents (all of a row's agents must be its own); the store's query holds the rule.
    let reader = Reader { principal: ctx.principal().name.clone(), reach: ctx.reach().clone() };
    let filter = AuditFilter {
        since_ms: args.since,
        until_ms: args.until,
        principal: args.principal,
        action_prefix: args.action,
        result: args.result,
        correlation_id: args.correlation_id,
        target_type: args.target_type,
        agent_id: args.agent_id,
        reader: Some(reader),
        limit: pager.limit() as i64,
        before_id: pager.below(),
    };
    let page = ctx.services().audit_log().page(&filter).await?;
    let entries = page.entries.into_iter().map(|(id, entry)| (id, json!(entry))).collect();
    pager.answer_keyed(ctx, json!({"count": page.matched}), "entries", entries, page.matched)
}

fn token_json(t: &TokenRecord, now: i64) -> Value {
    json!({"token_id": t.id, "name": t.name, "principal": t.principal, "tier": t.tier, "created_at": t.created_at,
           "expires_at": t.expires_at, "state": t.state(now).label()})
}

pub async fn list_api_tokens(ctx: &ToolContext, args: args::ListApiTokens) -> ToolResult {
    let now = ctx.services().clock().now_secs();
    let pager = Pager::of(&args, usize::MAX)?;
    let (tokens, count) = pager.window(ctx.services().credentials().tokens(Some(&ctx.principal().name)).await?);
    let tokens: Vec<Value> = tokens.iter().map(|t| token_json(t, now)).collect();
    pager.answer(ctx, json!({"count": count}), "tokens", tokens, count)
}

pub async fn create_api_token(ctx: &ToolContext, args: args::CreateApiToken) -> ToolResult {
    let now = ctx.services().clock().now_secs();
    if args.expires_at <= now || args.expires_at > now + MAX_TOKEN_SECS {
        return Err(ToolError::InvalidArguments(format!(
            "expires_at must be in the future and at most {MAX_TOKEN_DAYS} days away: between {} and {} (Unix seconds)",
            now + 1,
            now + MAX_TOKEN_SECS
        )));
    }
    let toolsets = args
        .toolsets
        .as_deref()
        .map(|t| toolgate_domain::toolsets::canonical(t, ctx.services().catalogue().toolsets))
        .transpose()
        .map_err(|e| ToolError::InvalidArguments(format!("toolsets: {e}")))?;
    let new = NewToken {
        principal: &ctx.principal().name,
        tier: Some(&args.mcp_tier),
        name: &args.name,
        now,
        expires_at: args.expires_at,
        toolsets: toolsets.as_deref(),
    };
    let (record, secret) = ctx.services().credentials().create_token(new).await?;
    Ok(ToolOutput::Structured(json!({"token_id": record.id, "secret": secret, "tier": record.tier, "expires_at": record.expires_at,
        "toolsets": record.toolsets, "note": "the secret is shown only now"})))
}

/// The caller's own token, or (for a principal administrator, policy.yaml `server`) anyone's.
async fn owned_token(ctx: &ToolContext, id: &str, others_allowed: bool) -> Result<TokenRecord, ToolError> {
    let mine = |t: &TokenRecord| t.principal == ctx.principal().name;
    let admin = others_allowed && ctx.services().catalogue().may_manage_principals(&ctx.principal().roles);
    match ctx.services().credentials().token(id).await? {
        Some(t) if mine(&t) || admin => Ok(t),
        _ => Err(ToolError::NotFound(format!("you have no token `{id}` (list_api_tokens shows yours)"))),
    }
}

pub async fn revoke_api_token(ctx: &ToolContext, args: args::RevokeApiToken) -> ToolResult {
    let token = owned_token(ctx, &args.token_id, true).await?;
    // Revoking a revoked token is the state asked for: success with `changed: false`.
    let changed = ctx.services().credentials().revoke_token(&token.id, ctx.services().clock().now_secs()).await?;
    Ok(ToolOutput::Structured(json!({
        "token_id": token.id,
        "revoked": true,
        "changed": changed,
        "was_calling_token": token.id == ctx.caller().token_id,
    })))
}

pub async fn rotate_api_token(ctx: &ToolContext, args: args::RotateApiToken) -> ToolResult {
    let now = ctx.services().clock().now_secs();
    let token = owned_token(ctx, &args.token_id, false).await?;
    if token.state(now) != TokenState::Active {
        return Err(ToolError::NotFound(format!("token `{}` is revoked or expired; it cannot be rotated", token.id)));
    }
    let overlap = args.overlap_days.unwrap_or(7) * 86_400;
    let (successor, secret) = ctx.services().credentials().rotate_token(&token, overlap, token.expires_at, now).await?;
    Ok(ToolOutput::Structured(json!({
        "predecessor_id": token.id,
        "successor_id": successor.id,
        "secret": secret,
        "tier": successor.tier,
        "expires_at": successor.expires_at,
        "predecessor_expires_at": token.expires_at.min(now + overlap),
        "next_step": "switch to the new secret, then call confirm_api_token_rotation with successor_id and the secret to revoke the old token"
    })))
}

pub async fn confirm_api_token_rotation(ctx: &ToolContext, args: args::ConfirmApiTokenRotation) -> ToolResult {
    let now = ctx.services().clock().now_secs();
    let confirmed =
        ctx.services().credentials().confirm_rotation(&args.token_id, &args.secret, &ctx.principal().name, now).await?;
    match confirmed {
        Some(predecessor) => Ok(ToolOutput::Structured(
            json!({"successor_id": args.token_id, "revoked_predecessor_id": predecessor, "confirmed": true}),
        )),
        None => Err(ToolError::NotFound(
            "no rotation to confirm: token_id must be the successor rotate_api_token returned, with its secret".into(),
        )),
    }
}

pub async fn check_permission(ctx: &ToolContext, args: args::CheckPermission) -> ToolResult {
    let catalogue = ctx.services().catalogue();
    let tier = ctx.caller().tier;
    let (subject, securable, operation, decision) = match (&args.tool, &args.securable, &args.operation) {
        (Some(name), None, None) => {
            let Some(id) = ToolId::from_name(name) else {
                return Err(ToolError::NotFound(format!("no tool `{name}`; discover_permissions lists the tools")));
            };
            let m = id.meta();
            (name.clone(), m.securable.to_string(), m.operation.to_string(), catalogue.decision(m, tier))
        }
        (None, Some(s), Some(o)) => {
            catalogue.check_pair(s, o).map_err(|why| {
                ToolError::InvalidArguments(format!("{why} (policy.yaml declares them; discover_permissions lists the tools' pairs)"))
            })?;
            (format!("{s}:{o}"), s.clone(), o.clone(), tier.map_or(Decision::Deny, |t| t.decide(s, o)))
        }
        _ => return Err(ToolError::InvalidArguments("give either `tool`, or both `securable` and `operation`".into())),
    };
    let granted = catalogue.permits(&ctx.principal().roles, &securable, &operation);
    Ok(ToolOutput::Structured(json!({
        "subject": subject,
        "permission": format!("{securable}:{operation}"),
        "tier": tier.map(|t| t.name),
        "tier_decision": decision.label(),
        "rbac_granted": granted,
        "allowed": decision != Decision::Deny && granted,
        "needs_approval": decision == Decision::ApprovalRequired,
    })))
}

//! Principals' fleet-wide roles and console accounts. The gate decides the role tools by a
//! durable administrator role read fresh from the store (tools.yaml `authorization`), after
//! the supervised tier's approval; the handlers keep the fleet administrable.

use serde_json::json;
use toolgate_domain::engines::PrincipalKind;
use toolgate_domain::{ToolError, ToolOutput, ToolResult};
use toolgate_policy::did_you_mean;

use crate::args;
use crate::services::ToolContext;

/// A person's fleet-wide roles now; unknown principals are the caller's error, and an
/// engine principal's roles have tools of their own.
async fn roles_of(ctx: &ToolContext, principal: &str) -> Result<Vec<String>, ToolError> {
    match ctx.services().credentials().principal(principal).await? {
        Some(p) if p.kind == PrincipalKind::Engine => Err(ToolError::Refused {
            message: format!("`{principal}` is an engine principal: these tools change people's roles"),
            remediation: "use assign_engine_role or unassign_engine_role".into(),
        }),
        Some(p) => Ok(p.roles),
        None => Err(ToolError::NotFound(format!("no principal `{principal}` (`toolgate principal list` lists them)"))),
    }
}

fn ensure_declared(ctx: &ToolContext, role: &str) -> Result<(), ToolError> {
    let catalogue = ctx.services().catalogue();
    match catalogue.role_names().any(|r| r == role) {
        true => Ok(()),
        false => Err(ToolError::InvalidArguments(format!(
            "no role `{role}` in policy.yaml; {}",
            did_you_mean(role, catalogue.role_names())
        ))),
    }
}

pub async fn assign_rbac_role(ctx: &ToolContext, args: args::AssignRbacRole) -> ToolResult {
    ensure_declared(ctx, &args.role)?;
    let before = roles_of(ctx, &args.principal).await?;
    let mut after = before.clone();
    if !after.contains(&args.role) {
        after.push(args.role.clone());
        let now = ctx.services().clock().now_secs();
        ctx.services().credentials().put_principal(&args.principal, &after, now).await?;
    }
    Ok(ToolOutput::Structured(json!({
        "principal": args.principal, "role": args.role, "changed": after != before,
        "roles_before": before, "roles_after": after,
    })))
}

pub async fn unassign_rbac_role(ctx: &ToolContext, args: args::UnassignRbacRole) -> ToolResult {
    ensure_declared(ctx, &args.role)?;
    let before = roles_of(ctx, &args.principal).await?;
    let after: Vec<String> = before.iter().filter(|r| **r != args.role).cloned().collect();
    let administrator = ctx.services().catalogue().rbac_administrator_role;
    if after != before && administrator == Some(args.role.as_str()) {
        let holders = ctx.services().credentials().principals().await?;
        let others = holders.iter().filter(|p| p.name != args.principal && p.roles.contains(&args.role)).count();
        if others == 0 {
            return Err(ToolError::Refused {
                message: format!("`{}` is the last principal holding {}: nobody could grant roles after it", args.principal, args.role),
                remediation: format!("grant {} to another principal first (assign_rbac_role)", args.role),
            });
        }
    }
    if after != before {
        let now = ctx.services().clock().now_secs();
        ctx.services().credentials().put_principal(&args.principal, &after, now).await?;
    }
    Ok(ToolOutput::Structured(json!({
        "principal": args.principal, "role": args.role, "changed": after != before,
        "roles_before": before, "roles_after": after,
    })))
}

pub async fn unlock_account(ctx: &ToolContext, args: args::UnlockAccount) -> ToolResult {
    let sign_in = ctx.services().sign_in();
    let Some(record) = sign_in.sign_in_record(&args.principal).await? else {
        return Err(ToolError::NotFound(format!("no principal `{}` (`toolgate principal list` lists them)", args.principal)));
    };
    let now = ctx.services().clock().now_ms();
    let locked = record.locked_until_ms > now || record.failed_attempts > 0;
    if locked {
        sign_in.sign_in_succeeded(&args.principal).await?;
    }
    Ok(ToolOutput::Structured(json!({
        "principal": args.principal,
        "changed": locked,
        "failed_attempts_before": record.failed_attempts,
        "locked_until_ms_before": record.locked_until_ms,
    })))
}

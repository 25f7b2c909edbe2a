//! Access reviews (docs/identities.md): campaigns over every grant, decisions on each, and a
//! closing that applies every flag at once, each revocation audited.

use serde_json::{Value, json};
use toolgate_domain::audit::{AuditEvent, AuditOutcome, TargetType};
use toolgate_domain::reviews::{Campaign, Decision, Grant, GrantKey, GrantType, ReviewRefusal};
use toolgate_domain::secrets::sha256_hex;
use toolgate_domain::{ToolError, ToolOutput, ToolResult};
use toolgate_store::RecordDecision;

use super::pages::Pager;
use crate::args;
use crate::services::ToolContext;

fn refused(refusal: ReviewRefusal) -> ToolError {
    match refusal {
        ReviewRefusal::Unknown(_) | ReviewRefusal::UnknownGrant { .. } => ToolError::NotFound(refusal.to_string()),
        ReviewRefusal::OwnGrant(_) => ToolError::Refused {
            message: refusal.to_string(),
            remediation: "ask another reviewer to decide it".into(),
        },
        other => ToolError::InvalidArguments(other.to_string()),
    }
}

async fn audit(ctx: &ToolContext, action: &str, campaign_id: &str, detail: String) {
    let event = AuditEvent::new(ctx.services().clock().now_ms(), action, AuditOutcome::Success)
        .by(ctx.caller())
        .target(TargetType::AccessReview, campaign_id.to_string())
        .detail(detail)
        .correlation(ctx.correlation_id());
    ctx.services().audit().record_durable(event).await;
}

fn grant_json(g: &Grant) -> Value {
    let mut grant = json!({
        "principal_type": g.key.principal_type.label(), "principal_id": g.key.principal_id,
        "role_name": g.key.role_name, "group_id": (!g.key.group_id.is_empty()).then_some(&g.key.group_id),
        "holder": g.holder, "decision": g.decision.map(Decision::label), "justification": g.justification,
        "decided_by": g.decided_by, "decided_at": g.decided_at, "applied_at": g.applied_at,
    });
    if let Some(source) = &g.source {
        grant["source"] = json!(source);
    }
    grant
}

fn summary(c: &Campaign, grants: &[Grant]) -> Value {
    let count = |d: Option<Decision>| grants.iter().filter(|g| g.decision == d).count();
    json!({
        "campaign_id": c.campaign_id, "title": c.title, "opened_by": c.opened_by, "opened_at": c.opened_at,
        "closed_by": c.closed_by, "closed_at": c.closed_at, "grants": grants.len(),
        "attested": count(Some(Decision::Attested)), "flagged_revoke": count(Some(Decision::FlaggedRevoke)),
        "undecided": count(None),
    })
}

async fn campaign(ctx: &ToolContext, id: &str) -> Result<(Campaign, Vec<Grant>), ToolError> {
    let found = ctx.services().repositories().reviews.review(id).await?;
    found.ok_or_else(|| refused(ReviewRefusal::Unknown(id.to_string())))
}

pub async fn open_access_review(ctx: &ToolContext, args: args::OpenAccessReview) -> ToolResult {
    let services = ctx.services();
    let now = services.clock().now_secs();
    let (opened, count) = services.repositories().reviews.open_review(&args.title, &ctx.principal().name, now).await?;
    audit(ctx, "access_review.open", &opened.campaign_id, format!("\"{}\" over {count} grant(s)", args.title)).await;
    let (campaign, grants) = campaign(ctx, &opened.campaign_id).await?;
    Ok(ToolOutput::Structured(summary(&campaign, &grants)))
}

pub async fn list_access_reviews(ctx: &ToolContext, args: args::ListAccessReviews) -> ToolResult {
    let pager = Pager::of(&args, usize::MAX)?;
    let (page, count) = pager.window(ctx.services().repositories().reviews.reviews().await?);
    let campaigns: Vec<Value> = page.iter().map(|(c, g)| summary(c, g)).collect();
    pager.answer(ctx, json!({"count": count}), "campaigns", campaigns, count)
}

pub async fn get_access_review(ctx: &ToolContext, args: args::GetAccessReview) -> ToolResult {
    let pager = Pager::of(&args, usize::MAX)?;
    let (campaign, grants) = campaign(ctx, &args.campaign_id).await?;
    let summary = summary(&campaign, &grants);
    let (grants, count) = pager.window(grants);
    let listed: Vec<Value> = grants.iter().map(grant_json).collect();
    pager.answer(ctx, json!({"campaign": summary}), "grants", listed, count)
}

pub async fn record_attestation(ctx: &ToolContext, args: args::RecordAttestation) -> ToolResult {
    let principal_type = GrantType::from_label(&args.principal_type)
        .ok_or_else(|| ToolError::InvalidArguments(format!("no principal_type `{}`", args.principal_type)))?;
    let group_id = match (principal_type, args.group_id) {
        (GrantType::Group, Some(group)) => group,
        (GrantType::Group, None) => {
            return Err(ToolError::InvalidArguments(
                "a `group` grant is a role held on a management group: give its `group_id` (get_access_review lists them)".into(),
            ));
        }
        (GrantType::Idp, group) => group.unwrap_or_default(),
        (_, Some(_)) => {
            return Err(ToolError::InvalidArguments(
                "`group_id` names the group of a `group` or `idp` grant only".into(),
            ));
        }
        (_, None) => String::new(),
    };
    let decision = Decision::from_label(&args.decision)
        .ok_or_else(|| ToolError::InvalidArguments(format!("no decision `{}`", args.decision)))?;
    let key = GrantKey { principal_type, principal_id: args.principal_id, role_name: args.role_name, group_id };
    let services = ctx.services();
    let record = RecordDecision {
        campaign_id: &args.campaign_id,
        key,
        decision,
        justification: args.justification.as_deref(),
        by: &ctx.principal().name,
        now: services.clock().now_secs(),
    };
    let (before, grant) = services.repositories().reviews.record_decision(record).await?.map_err(refused)?;
    let detail = format!(
        "{} {} {}{}: {} (was {})",
        grant.key.principal_type.label(),
        grant.key.principal_id,
        grant.key.role_name,
        if grant.key.group_id.is_empty() { String::new() } else { format!(" on {}", grant.key.group_id) },
        decision.label(),
        before.map_or("undecided", Decision::label)
    );
    audit(ctx, "access_review.decision", &args.campaign_id, detail).await;
    let mut answer = json!({
        "campaign_id": args.campaign_id, "grant": grant_json(&grant), "previous_decision": before.map(Decision::label),
    });
    if decision == Decision::FlaggedRevoke
        && let Some(remediation) = grant.changed_elsewhere()
    {
        answer["remediation"] = json!(remediation);
    }
    Ok(ToolOutput::Structured(answer))
}

pub async fn close_access_review(ctx: &ToolContext, args: args::CloseAccessReview) -> ToolResult {
    let services = ctx.services();
    let allow_undecided = services.catalogue().close_reviews_with_undecided;
    let now = services.clock().now_secs();
    let reviews = &services.repositories().reviews;
    let closed =
        reviews.close_review(&args.campaign_id, &ctx.principal().name, now, allow_undecided).await?.map_err(refused)?;
    // Roles and tokens changed beside the credential cache: this server forgets at once.
    services.credentials().forget_cached();
    for g in &closed.applied {
        let detail = format!("revoked {} {} {}", g.key.principal_type.label(), g.key.principal_id, g.key.role_name);
        audit(ctx, "access_review.revoke", &args.campaign_id, detail).await;
    }
    let mut at_idp = Vec::new();
    for g in &closed.at_idp {
        let remediation = g.changed_elsewhere().unwrap_or_default();
        audit(ctx, "access_review.flag_at_idp", &args.campaign_id, remediation.clone()).await;
        at_idp.push(json!({"grant": grant_json(g), "remediation": remediation}));
    }
    let detail = format!(
        "closed: {} revoked, {} undecided, {} to change at the identity provider",
        closed.applied.len(),
        closed.undecided.len(),
        closed.at_idp.len()
    );
    audit(ctx, "access_review.close", &args.campaign_id, detail).await;
    let (campaign, grants) = campaign(ctx, &args.campaign_id).await?;
    Ok(ToolOutput::Structured(json!({
        "campaign": summary(&campaign, &grants),
        "revoked": closed.applied.iter().map(grant_json).collect::<Vec<_>>(),
        "undecided": closed.undecided.iter().map(grant_json).collect::<Vec<_>>(),
        "at_identity_provider": at_idp,
    })))
}

/// RFC 4180 quoting of one field: the export's fields are few and plain, but a justification
/// may hold anything.
fn csv_field(text: &str) -> String {
    match text.contains([',', '"', '\n', '\r']) {
        true => format!("\"{}\"", text.replace('"', "\"\"")),
        false => text.to_string(),
    }
}

const CSV_HEADER: &str = "campaign_id,principal_type,principal_id,role_name,group_id,holder,decision,justification,decided_by,decided_at,applied_at";

pub async fn export_access_review(ctx: &ToolContext, args: args::ExportAccessReview) -> ToolResult {
    let reviews = &ctx.services().repositories().reviews;
    let (campaign, grants) = match args.campaign_id {
        Some(id) => campaign(ctx, &id).await?,
        None => reviews.reviews().await?.into_iter().filter(|(c, _)| !c.is_open()).max_by_key(|(c, _)| c.closed_at).ok_or_else(
            || ToolError::NotFound("no access review has closed yet: give `campaign_id` (list_access_reviews lists them)".into()),
        )?,
    };
    let mut csv = format!("{CSV_HEADER}\r\n");
    for g in &grants {
        let number = |n: Option<i64>| n.map(|n| n.to_string()).unwrap_or_default();
        let fields = [
            campaign.campaign_id.clone(),
            g.key.principal_type.label().into(),
            g.key.principal_id.clone(),
            g.key.role_name.clone(),
            g.key.group_id.clone(),
            g.holder.clone(),
            g.decision.map(Decision::label).unwrap_or_default().into(),
            g.justification.clone().unwrap_or_default(),
            g.decided_by.clone().unwrap_or_default(),
            number(g.decided_at),
            number(g.applied_at),
        ];
        csv.push_str(&fields.iter().map(|f| csv_field(f)).collect::<Vec<_>>().join(","));
        csv.push_str("\r\n");
    }
    let document = json!({"campaign": summary(&campaign, &grants), "grants": grants.iter().map(grant_json).collect::<Vec<_>>()});
    let json_text = serde_json::to_string_pretty(&document).expect("serializes");
    let (sha256_csv, sha256_json) = (sha256_hex(&csv), sha256_hex(&json_text));
    let detail = format!("exported: sha256 of the CSV {sha256_csv}, of the JSON {sha256_json}");
    audit(ctx, "access_review.export", &campaign.campaign_id, detail).await;
    Ok(ToolOutput::Structured(json!({
        "campaign_id": campaign.campaign_id, "csv": csv, "json": json_text,
        "sha256_csv": sha256_csv, "sha256_json": sha256_json,
    })))
}

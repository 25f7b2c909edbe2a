//! The agent CA's inventory (docs/trust.md): the certificates it issued, and their
//! revocation, confined to the agents the caller's grant covers, in the store query.

use serde_json::json;
use toolgate_domain::audit::{AuditEvent, AuditOutcome, TargetType};
use toolgate_domain::certs::normalized_serial;
use toolgate_domain::{ToolError, ToolOutput, ToolResult};

use super::pages::Pager;
use crate::args;
use crate::trust::signing::FrameSigner;
use crate::services::ToolContext;

/// Certificates listed when the call does not say (the schema's default).
const DEFAULT_LISTED: usize = 200;

pub async fn list_issued_certs(ctx: &ToolContext, args: args::ListIssuedCerts) -> ToolResult {
    let pager = Pager::of(&args, DEFAULT_LISTED)?;
    let (certificates, total) =
        ctx.services().repositories().certs.issued(ctx.reach(), pager.limit(), pager.start()).await?;
    let certificates = certificates.iter().map(|certificate| json!(certificate)).collect();
    pager.answer(ctx, json!({"total": total}), "certificates", certificates, total as usize)
}

/// Revokes one certificate of an agent the caller may see. Its own audit row says how it
/// ended, apart from the call's: `ca.cert.revoked` success, denied for a serial not found
/// (none such, or outside the caller's reach), failure for a store fault, so an outage is
/// never recorded as a refused revoke.
pub async fn revoke_certificate(ctx: &ToolContext, args: args::RevokeCertificate) -> ToolResult {
    let services = ctx.services();
    let now = services.clock().now_ms();
    let serial = normalized_serial(&args.serial_hex);
    let by = &ctx.principal().name;
    let revoked = services.repositories().certs.revoke(&serial, ctx.reach(), by, args.reason.as_deref(), now).await;
    let event = |outcome, detail: String| {
        AuditEvent::new(now, "ca.cert.revoked", outcome)
            .by(ctx.caller())
            .target(TargetType::Certificate, serial.clone())
            .detail(detail)
            .correlation(ctx.correlation_id())
    };
    let (certificate, revoked_now) = match revoked {
        Ok(Some(found)) => found,
        Ok(None) => {
            services.audit().record_durable(event(AuditOutcome::Denied, "serial not found".into())).await;
            return Err(ToolError::NotFound(format!(
                "no certificate {serial} among your agents' (list_issued_certs lists them)"
            )));
        }
        Err(e) => {
            services.audit().record_durable(event(AuditOutcome::Failure, format!("the CA store failed: {e}"))).await;
            return Err(e.into());
        }
    };
    // The agent's other certificates go with it: none outlives the revocation (docs/trust.md).
    let with_it: Vec<&String> = revoked_now.iter().filter(|s| **s != serial).collect();
    let chain = match with_it.len() {
        0 => String::new(),
        n => format!(" (and {n} other certificate(s) of the agent)"),
    };
    let detail = match (revoked_now.is_empty(), &args.reason) {
        (true, _) => "already revoked".to_string(),
        (false, Some(reason)) => format!("agent {}{chain}: {reason}", certificate.agent_id),
        (false, None) => format!("agent {}{chain}", certificate.agent_id),
    };
    let row = event(AuditOutcome::Success, detail).about_agents([certificate.agent_id.clone()]);
    services.audit().record_durable(row).await;
    // Cut off here at once; the other replicas within their revocation check.
    services.fleet().certificates_revoked(&certificate.agent_id, &revoked_now);
    let changed = !revoked_now.is_empty();
    Ok(ToolOutput::Structured(json!({"certificate": certificate, "changed": changed, "also_revoked": with_it})))
}

/// Makes the next code-signing key and signs with it from now on (docs/trust.md).
pub async fn issue_code_signing_cert(ctx: &ToolContext, args: args::IssueCodeSigningCert) -> ToolResult {
    let services = ctx.services();
    let Some(trust) = services.trust() else {
        return Err(ToolError::Refused {
            message: "this server has no agent CA, so no code-signing key".into(),
            remediation: "start the server with a key-encryption key (--kek-file or TOOLGATE_KEK, docs/secrets.md)".into(),
        });
    };
    let now = services.clock().now_ms();
    let issued = FrameSigner::issue_next(services.vault(), &trust.ca, now).await;
    let event = |outcome, detail: String| {
        AuditEvent::new(now, "ca.codesign.issued", outcome)
            .by(ctx.caller())
            .detail(detail)
            .correlation(ctx.correlation_id())
    };
    let (signer, info) = match issued {
        Ok(issued) => issued,
        Err(e) => {
            services.audit().record_durable(event(AuditOutcome::Failure, e.to_string())).await;
            return Err(ToolError::Refused {
                message: format!("no code-signing key was made: {e}"),
                remediation: "retry; if it fails again, see the server's log".into(),
            });
        }
    };
    let why = args.reason.map(|r| format!(": {r}")).unwrap_or_default();
    let detail = format!("generation {} ({}){why}", info.generation, info.fingerprint);
    services.audit().record_durable(event(AuditOutcome::Success, detail)).await;
    trust.signer.replace(signer);
    Ok(ToolOutput::Structured(json!({
        "generation": info.generation, "ca_generation": info.ca_generation, "fingerprint": info.fingerprint,
    })))
}

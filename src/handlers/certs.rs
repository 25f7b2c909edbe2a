//! The agent CA's inventory (docs/trust.md): the certificates it issued, confined to the
//! agents the caller's grant covers, in the store query.

use serde_json::json;
use toolgate_domain::{ToolOutput, ToolResult};

use crate::args;
use crate::services::ToolContext;

/// Certificates listed when the call does not say (the schema's default).
const DEFAULT_LISTED: usize = 200;

pub async fn list_issued_certs(ctx: &ToolContext, args: args::ListIssuedCerts) -> ToolResult {
    let limit = args.limit.map_or(DEFAULT_LISTED, |l| l as usize);
    let offset = args.offset.map_or(0, |o| o as usize);
    let (certificates, total) = ctx.services().repositories().certs.issued(ctx.reach(), limit, offset).await?;
    let next = offset + certificates.len();
    let next_offset = (next < total as usize).then_some(next);
    Ok(ToolOutput::Structured(json!({"total": total, "next_offset": next_offset, "certificates": certificates})))
}

//! Uploads in the console (docs/uploads.md): the grants of the agents a person may see (with
//! the grant of `list_upload_grants`' pair, fleet-wide or on groups), and a download of what
//! each brought, streamed from the store chunk by chunk. The bytes are the agent's: served as
//! an attachment, never rendered, and each download is audited.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::html;
use toolgate_domain::audit::{AuditEvent, AuditOutcome, AuditSink, TargetType};
use toolgate_domain::groups::Reach;
use toolgate_domain::uploads::UploadKind;
use toolgate_store::{StoredContent, UploadStore};

use super::{AppState, SignedIn, html as respond, pages};

/// The tool whose pair reading uploads takes, here as over MCP.
const READING_TOOL: &str = "list_upload_grants";
const PAGE_ROWS: usize = 200;

impl SignedIn {
    /// The agents whose uploads this person may read; the refusal page otherwise.
    fn upload_reach(&self, state: &AppState) -> Result<Reach, Box<Response>> {
        let catalogue = state.services.catalogue();
        let Some(tool) = catalogue.tools.iter().find(|t| t.name == READING_TOOL) else {
            return Err(Box::new(self.refused("This server's catalogue has no upload grants.")));
        };
        catalogue.reach(&self.1, tool.securable, tool.operation).ok_or_else(|| {
            Box::new(self.refused(&format!(
                "Your roles (fleet-wide or on groups) do not grant {}:{}: uploads are not yours to read.",
                tool.securable, tool.operation
            )))
        })
    }
}

pub async fn page(State(state): State<Arc<AppState>>, who: SignedIn) -> Response {
    let reach = match who.upload_reach(&state) {
        Ok(reach) => reach,
        Err(refused) => return *refused,
    };
    let grants = match state.services.repositories().uploads.grants(&reach, None, PAGE_ROWS).await {
        Ok(grants) => grants,
        Err(e) => return who.unavailable(e),
    };
    let now = state.services.clock().now_ms();
    let body = html! {
        p.muted { "Files agents sent under upload grants, newest first (at most " (PAGE_ROWS) "). Their content is the agent's: download it, never open it here." }
        table #uploads {
            tr { th { "Grant" } th { "Agent" } th { "State" } th { "Path" } th { "Size" } th { "SHA-256" } th { "Kept until" } th { "" } }
            @for g in &grants {
                tr {
                    td { code { (g.minted.grant_id) } } td { code { (g.minted.agent_id) } } td { (g.state_at(now)) }
                    td { (g.uploaded_path.as_deref().or(g.minted.source_path.as_deref()).unwrap_or("")) }
                    td { (g.size_bytes.map(|s| s.to_string()).unwrap_or_default()) }
                    td { code { (g.sha256.as_deref().unwrap_or("")) } }
                    td { (g.retained_until_ms().map(pages::when_ms).unwrap_or_default()) }
                    td { @if g.content_kept { a href={ "/console/uploads/" (g.minted.grant_id) "/content" } { "Download" } } }
                }
            }
        }
    };
    respond(StatusCode::OK, pages::layout("Uploads", &who.chrome(), body))
}

/// The stored content's chunks, in order, as a body.
fn streamed(uploads: Arc<dyn UploadStore>, content: StoredContent) -> Body {
    let chunks = futures_util::stream::unfold((uploads, content, 0i64), |(uploads, content, seq)| async move {
        if seq >= content.chunks {
            return None;
        }
        let chunk = match uploads.content_chunk(&content, seq).await {
            Ok(Some(bytes)) => Ok(bytes::Bytes::from(bytes)),
            Ok(None) => Err(std::io::Error::other(format!("chunk {seq} of {} is missing", content.sha256))),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        };
        Some((chunk, (uploads, content, seq + 1)))
    });
    Body::from_stream(chunks)
}

pub async fn download(State(state): State<Arc<AppState>>, who: SignedIn, Path(grant_id): Path<String>) -> Response {
    let reach = match who.upload_reach(&state) {
        Ok(reach) => reach,
        Err(refused) => return *refused,
    };
    let uploads = state.services.repositories().uploads.clone();
    let grant = match uploads.grant(&grant_id, &reach).await {
        Ok(grant) => grant,
        Err(e) => return who.unavailable(e),
    };
    let gone = |message: &str| respond(StatusCode::NOT_FOUND, pages::refused("Not found", message, &who.chrome()));
    let Some(grant) = grant else { return gone("No such upload grant among your agents'.") };
    let content = match grant.sha256.as_deref().filter(|_| grant.content_kept) {
        Some(sha256) => uploads.content(sha256).await,
        None => return gone("This grant holds no content: nothing was uploaded, or its retention ended."),
    };
    let content = match content {
        Ok(Some(content)) => content,
        Ok(None) => return gone("Its retention ended: the content was deleted."),
        Err(e) => return who.unavailable(e),
    };
    let event = AuditEvent::new(state.services.clock().now_ms(), "upload.downloaded", AuditOutcome::Success)
        .by_principal(&who.0.principal)
        .target(TargetType::UploadGrant, grant_id.clone())
        .about_agents([grant.minted.agent_id.clone()])
        .detail(format!("{} bytes, sha256 {}", content.size_bytes, content.sha256));
    state.services.audit().record(event);
    let (kind, extension) = match grant.kind {
        Some(UploadKind::Tar) => ("application/x-tar", "tar"),
        _ => ("application/octet-stream", "bin"),
    };
    let disposition = format!("attachment; filename=\"upload-{grant_id}.{extension}\"");
    let mut response = (StatusCode::OK, streamed(uploads, content.clone())).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(content.size_bytes.max(0) as u64));
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    if let Ok(value) = HeaderValue::from_str(&content.sha256) {
        headers.insert("x-content-sha256", value);
    }
    response
}

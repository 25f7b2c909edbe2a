//! The human side of approvals, and the audit log, over HTTP:
//! `/api/v1/approvals[/<id>[/approve|/reject]]` and `/api/v1/audit`. Every handler takes a
//! [`Reviewer`], so none can forget the check.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};
use toolgate_domain::approvals::ReviewRefusal;
use toolgate_domain::audit::AuditFilter;

use super::auth::Reviewer;
use super::{ApiError, AppState, json_response};
use crate::metrics::ApprovalEvent;

pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/approvals", get(list))
        .route("/api/v1/approvals/{id}", get(show))
        .route("/api/v1/approvals/{id}/approve", post(approve))
        .route("/api/v1/approvals/{id}/reject", post(reject))
        .route("/api/v1/audit", get(audit))
}

fn ok(body: Value) -> Response {
    json_response(StatusCode::OK, body.to_string())
}

async fn list(
    State(state): State<Arc<AppState>>,
    _: Reviewer,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let approvals = state.mcp.services().approvals();
    let all = approvals.approvals(q.get("status").map(String::as_str), q.get("submitter").map(String::as_str), 1000);
    Ok(ok(json!({"approvals": all.await?})))
}

async fn show(State(state): State<Arc<AppState>>, _: Reviewer, Path(id): Path<String>) -> Result<Response, ApiError> {
    match state.mcp.services().approvals().approval(&id).await? {
        Some(a) => Ok(ok(json!(a))),
        None => Err(ApiError::not_found(format!("no approval `{id}`"))),
    }
}

async fn approve(
    state: State<Arc<AppState>>,
    who: Reviewer,
    id: Path<String>,
    body: Body,
) -> Result<Response, ApiError> {
    decide(state, who, id, body, true).await
}

async fn reject(
    state: State<Arc<AppState>>,
    who: Reviewer,
    id: Path<String>,
    body: Body,
) -> Result<Response, ApiError> {
    decide(state, who, id, body, false).await
}

async fn decide(
    State(state): State<Arc<AppState>>,
    Reviewer(who): Reviewer,
    Path(id): Path<String>,
    body: Body,
    approve: bool,
) -> Result<Response, ApiError> {
    let body = super::read_body(&state, body).await?;
    let comment = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("comment").and_then(Value::as_str).map(str::to_string));
    let services = state.mcp.services();
    let decided = toolgate_gate::review(
        services.approvals(),
        services.audit(),
        services.clock(),
        &id,
        &who.name,
        approve,
        comment.as_deref(),
    )
    .await?;
    match decided {
        Ok(a) => {
            let event = if approve { ApprovalEvent::Approved } else { ApprovalEvent::Rejected };
            crate::metrics::approval(event);
            Ok(ok(json!(a)))
        }
        Err(refusal) => {
            let status = match refusal {
                ReviewRefusal::Unknown(_) => StatusCode::NOT_FOUND,
                ReviewRefusal::OwnRequest(_) => StatusCode::FORBIDDEN,
                _ => StatusCode::CONFLICT,
            };
            Err(ApiError::new(status, "refused", refusal.to_string()))
        }
    }
}

async fn audit(
    State(state): State<Arc<AppState>>,
    _: Reviewer,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let int = |key: &str| -> Result<Option<i64>, ApiError> {
        match q.get(key) {
            None => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| {
                ApiError::bad_request("bad_query", format!("`{key}` must be an integer (ms since the epoch)"))
            }),
        }
    };
    let (since_ms, until_ms, limit) = (int("since")?, int("until")?, int("limit")?.unwrap_or(100));
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request("bad_query", "`limit` is 1 to 1000"));
    }
    let filter = AuditFilter {
        since_ms,
        until_ms,
        principal: q.get("principal").cloned(),
        action_prefix: q.get("action").cloned(),
        result: q.get("result").cloned(),
        correlation_id: q.get("correlation_id").cloned(),
        limit,
    };
    let rows = state.mcp.services().audit_log().query(&filter).await?;
    Ok(ok(json!({"entries": rows})))
}

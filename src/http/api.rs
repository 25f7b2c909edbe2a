//! The human side of approvals, and the audit log, over HTTP:
//! `/api/v1/approvals[/<id>[/approve|/reject]]` and `/api/v1/audit`. Every handler takes a
//! [`Reviewer`], so none can forget the check.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};
use toolgate_domain::audit::AuditFilter;
use toolgate_domain::groups::{Reach, Reader};

use super::auth::{Authenticated, Reviewer};
use super::{ApiError, AppState, json_response};

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

/// The tickets the reviewer sees: every one fleet-wide, those within its groups on groups,
/// and its own.
async fn list(
    State(state): State<Arc<AppState>>,
    reviewer: Reviewer,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let services = &state.services;
    let reviewing = services.reviewing(&reviewer.principal).await?;
    let (status, submitter) = (q.get("status").map(String::as_str), q.get("submitter").map(String::as_str));
    let seen = reviewing.tickets(services.approvals(), status, submitter, 1000).await?;
    Ok(ok(json!({"approvals": seen})))
}

/// One approval: one a reviewer's API credential sees (its grant covers it); for an MCP
/// token, only the tickets its own principal submitted (the `status_url` of -32006). Any
/// other reads exactly like an unknown id.
async fn show(
    State(state): State<Arc<AppState>>,
    who: Authenticated,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let services = &state.services;
    let ticket = services.approvals().approval(&id).await?;
    let seen = match (ticket, who.token.tier.is_none()) {
        (Some(a), true) => {
            let principal = who.principal.principal();
            services.reviewing(&principal).await?.sees(&a).await?.then_some(a)
        }
        (Some(a), false) => (a.submitter == who.principal.name).then_some(a),
        (None, _) => None,
    };
    match seen {
        Some(a) => Ok(ok(json!(a))),
        None => Err(ApiError::not_found(format!("no approval `{id}`"))),
    }
}

/// Deciding takes a person signed in to the console (with a fresh second-factor proof), never
/// a bearer token: see `console::rest_decide`.
async fn approve(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Body,
) -> Result<Response, ApiError> {
    let body = super::read_body(&state, body).await?;
    super::console::rest_decide(&state, &headers, &id, true, &body).await
}

async fn reject(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Body,
) -> Result<Response, ApiError> {
    let body = super::read_body(&state, body).await?;
    super::console::rest_decide(&state, &headers, &id, false, &body).await
}

/// A reviewer reads the audit rows within what it reviews: every row fleet-wide; on groups,
/// its own and those about its groups' agents.
pub(crate) fn audit_reader(state: &AppState, principal: toolgate_domain::Principal) -> Reader {
    let reach = state.services.catalogue().review_reach(&principal).unwrap_or_else(|| Reach::Groups([].into()));
    Reader { principal: principal.name, reach }
}

async fn audit(
    State(state): State<Arc<AppState>>,
    reviewer: Reviewer,
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
        target_type: q.get("target_type").cloned(),
        agent_id: q.get("agent_id").cloned(),
        reader: Some(audit_reader(&state, reviewer.principal)),
        limit,
        before_id: None,
    };
    let rows = state.services.audit_log().query(&filter).await?;
    Ok(ok(json!({"entries": rows})))
}

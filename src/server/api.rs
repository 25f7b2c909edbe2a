//! The human side of approvals, and the audit log, over HTTP: `/api/v1/approvals[/<id>[/approve|/reject]]`
//! and `/api/v1/audit`. Only an administrator credential that carries no MCP tier may use it:
//! an MCP token (whatever its tier) can never approve anything.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::AppState;
use crate::store::{AuditFilter, Authentication, PrincipalRecord};

pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/approvals", get(list))
        .route("/api/v1/approvals/{id}", get(show))
        .route("/api/v1/approvals/{id}/approve", post(approve))
        .route("/api/v1/approvals/{id}/reject", post(reject))
        .route("/api/v1/audit", get(audit))
}

fn reply(status: StatusCode, body: Value) -> Response {
    (status, [(axum::http::header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

fn problem(status: StatusCode, error: &str, message: &str) -> Response {
    reply(status, json!({"error": error, "message": message}))
}

fn store_fault(e: crate::store::StoreError) -> Response {
    let mut r = problem(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", &format!("{e}; retry shortly"));
    r.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from_static("5"));
    r
}

/// The caller of this API: a principal allowed to review, holding an administrator's
/// tierless credential. Every handler here takes one, so none can forget the check.
struct Reviewer(PrincipalRecord);

impl FromRequestParts<Arc<AppState>> for Reviewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<AppState>) -> Result<Self, Response> {
        reviewer(state, &parts.headers).map(Reviewer)
    }
}

fn reviewer(state: &AppState, headers: &HeaderMap) -> Result<PrincipalRecord, Response> {
    super::http::check_host_and_origin(state, headers)?;
    let secret = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim().to_string());
    let Some(secret) = secret else {
        return Err(problem(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "send `Authorization: Bearer <administrator API token>`",
        ));
    };
    match state.store.authenticate(&secret, state.clock.now_secs()) {
        Ok(Authentication::Valid { token, principal }) => {
            if token.tier.is_some() {
                return Err(problem(
                    StatusCode::FORBIDDEN,
                    "mcp_token",
                    "MCP tokens can never approve: use an administrator API token (toolgate token create --principal P --api)",
                ));
            }
            if !crate::gate::rbac::permits_pair(&principal.roles, crate::registry::REVIEWER_PERMISSION) {
                return Err(problem(
                    StatusCode::FORBIDDEN,
                    "not_a_reviewer",
                    &format!("this principal's roles do not grant {}", crate::registry::REVIEWER_PERMISSION),
                ));
            }
            Ok(principal)
        }
        Ok(_) => Err(problem(StatusCode::UNAUTHORIZED, "unauthorized", "the token is unknown, revoked or expired")),
        Err(e) => Err(store_fault(e)),
    }
}

async fn list(State(state): State<Arc<AppState>>, _: Reviewer, Query(q): Query<HashMap<String, String>>) -> Response {
    match state.store.approvals(q.get("status").map(String::as_str), q.get("submitter").map(String::as_str), 1000) {
        Ok(all) => reply(StatusCode::OK, json!({"approvals": all})),
        Err(e) => store_fault(e),
    }
}

async fn show(State(state): State<Arc<AppState>>, _: Reviewer, Path(id): Path<String>) -> Response {
    match state.store.approval(&id) {
        Ok(Some(a)) => reply(StatusCode::OK, json!(a)),
        Ok(None) => problem(StatusCode::NOT_FOUND, "not_found", &format!("no approval `{id}`")),
        Err(e) => store_fault(e),
    }
}

async fn approve(state: State<Arc<AppState>>, who: Reviewer, id: Path<String>, body: Bytes) -> Response {
    decide(state, who, id, body, true).await
}

async fn reject(state: State<Arc<AppState>>, who: Reviewer, id: Path<String>, body: Bytes) -> Response {
    decide(state, who, id, body, false).await
}

async fn decide(
    State(state): State<Arc<AppState>>,
    Reviewer(who): Reviewer,
    Path(id): Path<String>,
    body: Bytes,
    approve: bool,
) -> Response {
    let comment = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("comment").and_then(Value::as_str).map(str::to_string));
    let record = |e| state.audit.record(e);
    match crate::admin::review(&state.store, &record, &state.clock, &id, &who.name, approve, comment.as_deref()) {
        Ok(Ok(a)) => reply(StatusCode::OK, json!(a)),
        Ok(Err(refusal)) => {
            let status = match refusal {
                crate::store::ReviewRefusal::Unknown(_) => StatusCode::NOT_FOUND,
                crate::store::ReviewRefusal::OwnRequest(_) => StatusCode::FORBIDDEN,
                _ => StatusCode::CONFLICT,
            };
            problem(status, "refused", &refusal.to_string())
        }
        Err(e) => store_fault(e),
    }
}

async fn audit(State(state): State<Arc<AppState>>, _: Reviewer, Query(q): Query<HashMap<String, String>>) -> Response {
    let int = |key: &str| -> Result<Option<i64>, Response> {
        match q.get(key) {
            None => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| {
                problem(
                    StatusCode::BAD_REQUEST,
                    "bad_query",
                    &format!("`{key}` must be an integer (ms since the epoch)"),
                )
            }),
        }
    };
    let (since, until, limit) = match (int("since"), int("until"), int("limit")) {
        (Ok(s), Ok(u), Ok(l)) => (s, u, l.unwrap_or(100)),
        (Err(r), _, _) | (_, Err(r), _) | (_, _, Err(r)) => return r,
    };
    if !(1..=1000).contains(&limit) {
        return problem(StatusCode::BAD_REQUEST, "bad_query", "`limit` is 1 to 1000");
    }
    let filter = AuditFilter {
        since_ms: since,
        until_ms: until,
        principal: q.get("principal").cloned(),
        action_prefix: q.get("action").cloned(),
        result: q.get("result").cloned(),
        correlation_id: q.get("correlation_id").cloned(),
        limit,
    };
    match state.store.audit(&filter) {
        Ok(rows) => reply(StatusCode::OK, json!({"entries": rows})),
        Err(e) => store_fault(e),
    }
}

//! `GET /metrics` (Prometheus text format): on the MCP listener for an administrator's API
//! token (a tierless credential, minted for reviewers only: an MCP token, whatever its tier,
//! is refused), or without
//! authentication on a listener of its own (`--metrics-listen`, for a scraper on a private
//! network).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::auth::Authenticated;
use super::{ApiError, AppState};

/// The Prometheus text exposition format's content type.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `/metrics` behind a token, for the guarded routes.
pub fn guarded_route() -> Router<Arc<AppState>> {
    Router::new().route("/metrics", get(with_token))
}

/// The `--metrics-listen` listener: `/metrics` and nothing else.
pub fn open_router(state: Arc<AppState>) -> Router {
    Router::new().route("/metrics", get(open)).fallback(not_found).with_state(state)
}

async fn with_token(State(state): State<Arc<AppState>>, who: Authenticated) -> Result<Response, ApiError> {
    if who.token.tier.is_some() {
        return Err(ApiError::forbidden(
            "mcp_token",
            "/metrics takes an administrator's API token (toolgate token create --principal P --api), not an MCP token",
        ));
    }
    // API credentials are minted for reviewers only (fleet-wide or on groups); roles may have
    // changed since. The server's figures are the whole fleet's: a grant on groups is not enough.
    let catalogue = state.services.catalogue();
    if !catalogue.may_review(&who.principal.roles) {
        let message = match catalogue.review_reach(&who.principal.principal()) {
            Some(_) => format!(
                "the server's figures cover the whole fleet: /metrics needs a fleet-wide grant of {}, and this principal's is on management groups",
                catalogue.reviewer
            ),
            None => format!("this principal's roles no longer grant {}", catalogue.reviewer),
        };
        return Err(ApiError::forbidden("not_a_reviewer", message));
    }
    Ok(scrape(&state).await)
}

async fn open(State(state): State<Arc<AppState>>) -> Response {
    scrape(&state).await
}

/// The gauges as this process sees them now, then every series.
async fn scrape(state: &AppState) -> Response {
    let services = &state.services;
    let (sessions, call_streams, channels) = state.mcp.live_counts();
    let fleet = services.fleet();
    let store = match services.repositories().health.gauges(services.clock().now_secs()).await {
        Ok(store) => Some(store),
        Err(e) => {
            tracing::warn!("metrics: the store's gauges could not be read: {e}");
            None
        }
    };
    let now = crate::metrics::Gauges {
        sessions,
        call_streams,
        channels,
        agents_connected: fleet.connected(),
        agents_enrolled: fleet.enrolled(),
        audit_queue: services.audit().queued(),
        store,
    };
    match crate::metrics::render(now) {
        Some(text) => ([(header::CONTENT_TYPE, HeaderValue::from_static(TEXT_FORMAT))], text).into_response(),
        None => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "metrics_unavailable",
            "this process has no metrics recorder (another was installed first)",
        )
        .into_response(),
    }
}

async fn not_found() -> Response {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "this listener serves GET /metrics only").into_response()
}

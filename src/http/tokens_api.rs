//! `/api/v1/tokens`: the REST twin of `list_api_tokens`, `create_api_token` and
//! `revoke_api_token`, for automation that holds an API credential (never an MCP token: a
//! credential that carries a tier is refused, as the seeds have it). Self-scoped: a caller
//! lists, mints and revokes its own principal's tokens.
//!
//! Each route runs the tool's own handler after the tool's RBAC pair and input schema, so
//! the rules (a declared tier, an expiry at most 90 days away) are the tool's, written once.
//! Minting a token at a tier whose policy has a person approve `create_api_token` (the
//! supervised tier) takes a fresh code from the caller's second factor
//! (`X-Toolgate-Second-Factor`), or a person's approval of a ticket minted here: the first
//! POST answers 202 with its `approval_id`, the same POST with it redeems it once. A ticket
//! minted here is redeemable only here, never by a tool call (nor one of theirs here).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{delete, get};
use serde_json::{Value, json};
use toolgate_domain::approvals::REST_SURFACE;
use toolgate_domain::audit::{AuditEvent, AuditOutcome, AuditSink};
use toolgate_domain::groups::Reach;
use toolgate_domain::{Denial, ToolError, ToolOutput};
use toolgate_policy::Decision;

use super::auth::Authenticated;
use super::{ApiError, AppState, json_response};
use crate::registry::{CATALOGUE, ToolId};
use crate::tools::dispatch;

/// The header carrying a fresh code from the caller's second factor (the console's).
const SECOND_FACTOR: &str = "x-toolgate-second-factor";

/// The tools these routes are twins of. Looked up by name: a server built from another
/// catalogue (docs/catalogue.md) may not have them, and then the route says so.
const LIST: &str = "list_api_tokens";
const CREATE: &str = "create_api_token";
const REVOKE: &str = "revoke_api_token";

fn twin(name: &str) -> Result<ToolId, ApiError> {
    ToolId::from_name(name).ok_or_else(|| {
        ApiError::not_found(format!("this server's catalogue has no `{name}`, the tool this route is the twin of"))
    })
}

pub fn routes() -> Router<Arc<AppState>> {
    Router::new().route("/api/v1/tokens", get(list).post(create)).route("/api/v1/tokens/{id}", delete(revoke))
}

/// An API credential: valid, and carrying no MCP tier.
struct ApiCaller(Authenticated);

impl FromRequestParts<Arc<AppState>> for ApiCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<AppState>) -> Result<Self, ApiError> {
        let who = Authenticated::from_request_parts(parts, state).await?;
        if let Some(tier) = &who.token.tier {
            return Err(ApiError::forbidden(
                "mcp_token",
                format!(
                    "this route takes an API credential, not an MCP token (this one carries tier `{tier}`): create one with `toolgate token create --principal P --api` or on the console"
                ),
            ));
        }
        Ok(ApiCaller(who))
    }
}

async fn list(State(state): State<Arc<AppState>>, who: ApiCaller) -> Result<Response, ApiError> {
    let answer = run(&state, &who.0, twin(LIST)?, json!({})).await?;
    Ok(json_response(StatusCode::OK, answer.to_string()))
}

async fn revoke(
    State(state): State<Arc<AppState>>,
    who: ApiCaller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    // Self-scoped, as the tool is not for an administrator: another principal's token reads
    // exactly like one that does not exist.
    let token = state.services.credentials().token(&id).await?;
    if token.is_none_or(|t| t.principal != who.0.principal.name) {
        return Err(ApiError::not_found(format!("you have no token `{id}` (GET /api/v1/tokens lists yours)")));
    }
    let tool = twin(REVOKE)?;
    let answer = run(&state, &who.0, tool, json!({"token_id": id})).await?;
    durable_audit(&state, &who.0, tool, format!("token {id}")).await;
    Ok(json_response(StatusCode::OK, answer.to_string()))
}

async fn create(
    State(state): State<Arc<AppState>>,
    who: ApiCaller,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let bytes = super::read_body(&state, body).await?;
    let mut arguments: Value = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::bad_request(
            "bad_json",
            format!("the body is not JSON ({e}): send {{\"name\", \"mcp_tier\", \"expires_at\"}}"),
        )
    })?;
    let approval_id = arguments.as_object_mut().and_then(|o| o.remove(toolgate_policy::APPROVAL_ID));
    let tool = twin(CREATE)?;
    let reach = check(&state, &who.0, tool, &arguments)?;
    let tier = arguments["mcp_tier"].as_str().and_then(|t| CATALOGUE.tier(t));
    let gated = CATALOGUE.decision(tool.meta(), tier) == Decision::ApprovalRequired;
    let who = &who.0;
    let assurance = match (gated, headers.get(SECOND_FACTOR).and_then(|v| v.to_str().ok())) {
        (false, _) => "the credential alone".to_string(),
        (true, Some(code)) => {
            let now = state.services.clock().now_ms();
            super::console::prove_code(&state, &who.principal.name, code.trim(), now)
                .await
                .map_err(|message| ApiError::new(StatusCode::UNAUTHORIZED, "second_factor_refused", message))?;
            "a fresh second-factor code".to_string()
        }
        (true, None) => {
            let approval_id = approval_id.as_ref().and_then(Value::as_str);
            match approved(&state, who, tool, &arguments, approval_id).await? {
                Ok(reviewer) => format!("approval by {reviewer}"),
                Err(pending) => return Ok(pending),
            }
        }
    };
    let answer = run_checked(&state, who, tool, arguments, reach).await?;
    durable_audit(&state, who, tool, format!("token {}; assurance: {assurance}", answer["token_id"])).await;
    Ok(json_response(StatusCode::CREATED, answer.to_string()))
}

/// The person who approved this exact mint (the ticket consumed now), or the 202 that says
/// a ticket waits for one.
async fn approved(
    state: &AppState,
    who: &Authenticated,
    tool: ToolId,
    arguments: &Value,
    approval_id: Option<&str>,
) -> Result<Result<String, Response>, ApiError> {
    let services = &state.services;
    let meta = tool.meta();
    let principal = &who.principal.name;
    let ticket = toolgate_gate::ticket_or_recall(
        services.approvals(),
        services.clock(),
        REST_SURFACE,
        principal,
        meta,
        arguments,
        approval_id,
    );
    match ticket.await {
        Ok(approval) => Ok(Ok(approval.reviewer.unwrap_or_default())),
        Err(Denial::ApprovalPending { approval, minted }) => {
            if minted {
                audit(state, who, tool, AuditOutcome::Pending, format!("approval {} minted", approval.id));
            }
            let body = json!({
                "status": "approval_required",
                "approval_id": approval.id,
                "status_url": format!("/api/v1/approvals/{}", approval.id),
                "expires_at": approval.expires_at,
                "remediation": "minting a token at this tier needs a person: once one approves the ticket on the console, POST the same body with this approval_id; or send a fresh code from your second factor in X-Toolgate-Second-Factor",
            });
            Ok(Err(json_response(StatusCode::ACCEPTED, body.to_string())))
        }
        Err(Denial::StoreFault { error, .. }) => Err(error.into()),
        Err(denial) => {
            audit(state, who, tool, AuditOutcome::Denied, denial.message());
            let status = match denial.retry_after_ms() {
                Some(_) => StatusCode::TOO_MANY_REQUESTS,
                None => StatusCode::FORBIDDEN,
            };
            Err(ApiError::new(status, "approval_refused", format!("{}: {}", denial.message(), denial.remediation())))
        }
    }
}

/// The tool's RBAC pair for this principal (what its grant covers), then its input schema.
fn check(state: &AppState, who: &Authenticated, tool: ToolId, arguments: &Value) -> Result<Reach, ApiError> {
    let meta = tool.meta();
    let Some(reach) = CATALOGUE.reach(&who.principal.principal(), meta.securable, meta.operation) else {
        audit(state, who, tool, AuditOutcome::Denied, format!("roles do not grant {}", meta.pair()));
        return Err(ApiError::forbidden(
            "forbidden",
            format!("this principal's roles do not grant {} (the pair of {})", meta.pair(), meta.name),
        ));
    };
    match state.mcp.check_arguments(meta, arguments) {
        Ok(()) => Ok(reach),
        Err(Denial::InvalidArguments(invalid)) => {
            Err(ApiError::bad_request("invalid_arguments", format!("{}; {}", invalid.message(), invalid.remediation())))
        }
        Err(other) => Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "schema_fault", other.message())),
    }
}

/// Runs the tool's handler as this principal (checked first) and answers its structured result.
async fn run(state: &AppState, who: &Authenticated, tool: ToolId, arguments: Value) -> Result<Value, ApiError> {
    let reach = check(state, who, tool, &arguments)?;
    run_checked(state, who, tool, arguments, reach).await
}

/// [`run`] for arguments [`check`] passed already (and the reach it found).
async fn run_checked(
    state: &AppState,
    who: &Authenticated,
    tool: ToolId,
    arguments: Value,
    reach: Reach,
) -> Result<Value, ApiError> {
    let roles: Vec<&str> = who.principal.roles.iter().map(String::as_str).collect();
    let ctx = crate::services::ToolContext::builder(state.mcp.services_handle())
        .principal(&who.principal.name, &roles)
        .reach(reach)
        .token_id(&who.token.id)
        .correlation_id(state.mcp.correlation_id())
        .build();
    let refused = |outcome, detail: String, error: ApiError| {
        audit(state, who, tool, outcome, detail);
        Err(error)
    };
    match dispatch(tool, &ctx, arguments).await {
        Ok(ToolOutput::Structured(value) | ToolOutput::Summarized { structured: value, .. }) => Ok(value),
        Ok(_) => {
            Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "no_structured_result", "the tool answered no JSON"))
        }
        Err(ToolError::InvalidArguments(m)) => {
            refused(AuditOutcome::Denied, m.clone(), ApiError::bad_request("invalid_arguments", m))
        }
        Err(ToolError::NotFound(m)) => refused(AuditOutcome::Denied, m.clone(), ApiError::not_found(m)),
        Err(ToolError::Refused { message, remediation }) => refused(
            AuditOutcome::Denied,
            message.clone(),
            ApiError::forbidden("refused", format!("{message}; {remediation}")),
        ),
        Err(ToolError::Store(e) | ToolError::StoreAfterStart { error: e, .. }) => Err(e.into()),
        Err(other) => Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "tool_failed", other.to_string())),
    }
}

/// `rest.<tool>`: the twin's rows sit beside the tool's own `mcp.<tool>` rows.
fn audit_row(state: &AppState, who: &Authenticated, tool: ToolId, outcome: AuditOutcome, detail: String) -> AuditEvent {
    let event =
        AuditEvent::new(state.services.clock().now_ms(), format!("{REST_SURFACE}.{}", tool.meta().name), outcome)
            .by_principal(&who.principal.name)
            .detail(detail)
            .correlation(state.mcp.correlation_id());
    AuditEvent { token_id: Some(who.token.id.clone()), ..event }
}

fn audit(state: &AppState, who: &Authenticated, tool: ToolId, outcome: AuditOutcome, detail: String) {
    state.services.audit().record(audit_row(state, who, tool, outcome, detail));
}

/// A change's row, durable before the answer (as a state-changing tool call's is).
async fn durable_audit(state: &AppState, who: &Authenticated, tool: ToolId, detail: String) {
    let row = audit_row(state, who, tool, AuditOutcome::Success, detail);
    state.services.audit().record_durable(row).await;
}

//! What becomes of a call whose handler asked the client something: in 2026-07-28 the
//! round's answers come from `inputResponses` and the signed `requestState` ([`Retry`]), and
//! an open question ends the call with `input_required`; in either era a question the client
//! cannot or will not answer ends it with a clear error.

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{Map, Value, json};
use toolgate_domain::approvals::canonical_arguments;
use toolgate_domain::audit::AuditOutcome;
use toolgate_domain::catalogue::ToolMeta;
use toolgate_domain::client::ClientChannel as _;
use toolgate_domain::redact::{redacted, truncated};
use toolgate_domain::{AskError, Caller, ClientMethod, ElicitAction, Elicited};

use super::input_required::{Binding, RoundChannel};
use super::jsonrpc as rpc;
use super::request::{Outcome, Request};
use super::{META_SERVER_INFO, McpServer, Reply};

/// A 2026-07-28 retry's `inputResponses` and `requestState`, as sent.
#[derive(Default)]
pub struct Retry {
    responses: Option<Value>,
    state: Option<Value>,
}

/// One stateless round: what its state is bound to, and its answers.
#[derive(Clone)]
pub struct Round {
    binding: Binding,
    pub channel: Arc<RoundChannel>,
}

impl Retry {
    pub fn take(params: &mut Value) -> Self {
        Self {
            responses: params.get_mut("inputResponses").map(Value::take),
            state: params.get_mut("requestState").map(Value::take),
        }
    }

    /// Checks the retry against the state the last round issued.
    pub async fn round(
        self,
        server: &McpServer,
        caller: &Caller,
        request: &Request<'_>,
        method: &'static str,
        name: &'static str,
        arguments: &Value,
    ) -> Result<Round, Outcome> {
        let invalid = |message: String| {
            let data = json!({"correlation_id": request.correlation_id});
            request.error(rpc::INVALID_PARAMS, message, Some(data))
        };
        let responses = match self.responses {
            None => Map::new(),
            Some(Value::Object(responses)) => responses,
            Some(_) => {
                return Err(invalid(
                    "params.inputResponses must be an object: each key of the last inputRequests, with its result"
                        .into(),
                ));
            }
        };
        let state = match &self.state {
            None => None,
            Some(Value::String(state)) => Some(state.as_str()),
            Some(_) => return Err(invalid("params.requestState must be the string the last round returned".into())),
        };
        let binding = Binding::new(&caller.principal.name, method, name, arguments);
        let now = server.services.clock().now_secs();
        match server.request_states.round(&binding, state, responses, now) {
            Ok(round) => {
                if let Some(refusal) = server.used_elsewhere(round.nonce.as_ref(), now).await {
                    return Err(invalid(refusal));
                }
                let capabilities = request.era.client_capabilities().cloned().unwrap_or(Value::Null);
                Ok(Round { binding, channel: Arc::new(RoundChannel::new(capabilities, round)) })
            }
            Err(e) => Err(invalid(e.to_string())),
        }
    }
}

/// The key of the confirmation question of a `confirm` pair.
pub const CONFIRM_KEY: &str = "toolgate_confirm";

/// policy.yaml `confirm`: asks the client's own user, naming the exact call, before the
/// handler runs. `None`: confirmed, run it; `Some`: the call's outcome (declined, asked, or
/// the client cannot be asked).
pub async fn confirm(
    server: &McpServer,
    request: &Request<'_>,
    ctx: &crate::services::ToolContext,
    meta: &ToolMeta,
    arguments: &Value,
    round: Option<&Round>,
) -> Option<Outcome> {
    let shown = match meta.sensitive_arguments.is_empty() {
        true => canonical_arguments(arguments),
        false => canonical_arguments(&redacted(arguments, meta.sensitive_arguments)),
    };
    let message = format!(
        "Allow your assistant to run \"{}\" ({}) with {}? It changes state; this asks you, not a second person.",
        meta.title,
        meta.name,
        truncated(&shown, 512)
    );
    let schema = json!({"type": "object", "properties": {CONFIRM_KEY: {
        "type": "boolean", "title": "Run it", "description": "Yes: run the call as shown. No: nothing is done.",
    }}, "required": [CONFIRM_KEY]});
    let params = json!({"mode": "form", "message": message, "requestedSchema": schema});
    // 2026-07-28: a confirmation counts only with the state of the round that asked for it.
    if let Some(round) = round
        && !round.channel.verified()
    {
        if !round.channel.supports(ClientMethod::Elicitation) {
            return Some(unanswered(server, request, Some(round), AskError::Unsupported(ClientMethod::Elicitation)));
        }
        round.channel.ask_afresh(CONFIRM_KEY, ClientMethod::Elicitation, params);
        return Some(unanswered(server, request, Some(round), AskError::InputRequired));
    }
    let answer = match ctx.client().ask(CONFIRM_KEY, ClientMethod::Elicitation, params).await {
        Ok(answer) => Elicited::parse(CONFIRM_KEY, &answer),
        Err(e) => Err(e),
    };
    let answer = match answer {
        Ok(answer) => answer,
        Err(e) => return Some(unanswered(server, request, round, e)),
    };
    let yes = answer.content.as_ref().and_then(|c| c.get(CONFIRM_KEY)).and_then(Value::as_bool) == Some(true);
    if answer.action == ElicitAction::Accept && yes {
        return None;
    }
    let text = format!(
        "Not run: your client's user did not confirm {} (answer: {}). Nothing was changed.",
        meta.name,
        answer.action.as_str()
    );
    Some(Outcome {
        reply: request.era.success(
            request.id,
            server,
            json!({"content": [{"type": "text", "text": text}], "isError": true}),
        ),
        result: AuditOutcome::Denied,
        detail: format!("not confirmed by the client's user ({})", answer.action.as_str()),
    })
}

/// A confirm-gated call on a server started with `--mcp-no-streaming`, in an era whose
/// confirmation needs a stream (elicitation on the call's SSE answer): refused, nothing done,
/// with the switch named. (2026-07-28 confirms with an `input_required` result, plain JSON.)
pub fn unconfirmable_without_streams(server: &McpServer, request: &Request<'_>, meta: &ToolMeta) -> Outcome {
    let text = format!(
        "Not run: {} needs your client's user to confirm it, and asking takes a stream this server does not open (it runs with --mcp-no-streaming, behind a buffering proxy). Nothing was changed. Connect with protocol 2026-07-28, whose confirmation needs no stream, or ask the operator to serve MCP without that switch.",
        meta.name
    );
    Outcome {
        reply: request.era.success(
            request.id,
            server,
            json!({"content": [{"type": "text", "text": text}], "isError": true}),
        ),
        result: AuditOutcome::Denied,
        detail: "not confirmable: --mcp-no-streaming".into(),
    }
}

/// The call's outcome when its handler's question got no answer.
pub fn unanswered(server: &McpServer, request: &Request<'_>, round: Option<&Round>, asked: AskError) -> Outcome {
    let stateless = request.era.asks_in_rounds();
    match asked {
        AskError::InputRequired => match round.and_then(|r| Some((r, r.channel.open_questions()?))) {
            Some((round, (requests, carried))) => {
                let keys: Vec<&String> = requests.as_object().into_iter().flat_map(|r| r.keys()).collect();
                let detail =
                    format!("input required: {}", keys.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", "));
                let state = server.request_states.issue(&round.binding, carried, server.services.clock().now_secs());
                let result = json!({
                    "resultType": "input_required",
                    "inputRequests": requests,
                    "requestState": state,
                    "_meta": {META_SERVER_INFO: server.server_info},
                });
                Outcome {
                    reply: Reply::json(StatusCode::OK, rpc::result(request.id, &result)),
                    result: AuditOutcome::Pending,
                    detail,
                }
            }
            None => {
                request.error(rpc::INTERNAL_ERROR, "a handler waited for an answer it never asked for".into(), None)
            }
        },
        AskError::Unsupported(method) if stateless => {
            let message = format!(
                "this tool asks the client `{}`, which needs the `{}` client capability; declare it in _meta.{}",
                method.method(),
                method.capability(),
                super::META_CLIENT_CAPABILITIES
            );
            let required = json!({method.capability(): {}});
            let data = json!({"requiredCapabilities": required, "correlation_id": request.correlation_id});
            request.error(rpc::MISSING_CLIENT_CAPABILITY, message, Some(data))
        }
        AskError::Malformed { key, why } if stateless => {
            let data = json!({"correlation_id": request.correlation_id, "key": key});
            request.error(rpc::INVALID_PARAMS, format!("inputResponses.{key} is malformed: {why}"), Some(data))
        }
        other => {
            let remediation = match &other {
                AskError::Unsupported(m) => format!(
                    "asking the client needs a session whose initialize declared the `{}` capability, and a POST whose Accept admits text/event-stream (the question goes out on the call's stream)",
                    m.capability()
                ),
                AskError::TimedOut { .. } => "call again when someone can answer".into(),
                _ => "call again to be asked afresh".into(),
            };
            let text = format!("{other}. {remediation}");
            Outcome {
                reply: request.era.success(
                    request.id,
                    server,
                    json!({"content": [{"type": "text", "text": text}], "isError": true}),
                ),
                result: AuditOutcome::Failure,
                detail: other.to_string(),
            }
        }
    }
}

/// The client capabilities the tool needs that the client did not declare.
pub fn missing_capabilities(server: &McpServer, request: &Request<'_>, meta: &ToolMeta) -> Option<Outcome> {
    let required = server.gate.schemas().required_capabilities(meta)?;
    let declared = request.era.client_capabilities();
    let missing: Vec<&str> = required
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .filter(|k| declared.and_then(|d| d.get(*k)).is_none())
        .collect();
    if missing.is_empty() {
        return None;
    }
    let message = format!("{} needs the client capabilities: {}", meta.name, missing.join(", "));
    Some(request.error(rpc::MISSING_CLIENT_CAPABILITY, message, Some(json!({"requiredCapabilities": required}))))
}

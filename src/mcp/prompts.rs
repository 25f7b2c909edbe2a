//! `prompts/list` and `prompts/get`, in both eras. A prompt is shown to the tiers its pair
//! allows and got through the same gate as a tool; its arguments are checked and rendered as
//! data (`prompts_resources::render`); a resource it embeds is read through the resource gate.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use toolgate_domain::audit::{AuditEvent, AuditOutcome};
use toolgate_domain::prompts_resources::Role;
use toolgate_domain::redact::truncated;
use toolgate_domain::{Caller, ClientMethod, ClientRequests, Elicited};

use super::asking::{self, Retry};
use super::era::Era;
use super::jsonrpc as rpc;
use super::lists::{refuse_cursor, with_cache_hints};
use super::request::{Listeners, Outcome, Request};
use super::{LIST_TTL_MS, McpServer, Reply, resources};
use crate::prompts_resources::render::{self, Content};
use crate::untrusted;

pub async fn list(server: &McpServer, caller: &Caller, id: &Value, params: Option<&Value>, era: &Era) -> Reply {
    let request = Request { id, era, correlation_id: server.correlation_id(), listeners: Listeners::default() };
    if let Some(refusal) = refuse_cursor(&request, "prompts/list", params) {
        return refusal;
    }
    let prompts = server.prompts_resources.prompts_json(caller.tier);
    era.success(id, server, with_cache_hints(era, json!({"prompts": prompts}), LIST_TTL_MS))
}

pub async fn get(server: &Arc<McpServer>, caller: &Caller, id: &Value, params: Option<Value>, era: &Era) -> Reply {
    let request = Request { id, era, correlation_id: server.correlation_id(), listeners: Listeners::default() };
    let mut params = params.unwrap_or(Value::Null);
    let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
    let outcome = get_prompt(server, caller, &request, &mut params, &name).await;
    let event = AuditEvent::new(server.now_ms(), format!("mcp.prompt.{}", truncated(&name, 128)), outcome.result)
        .by(caller)
        .detail(truncated(&outcome.detail, 1024).to_string())
        .correlation(request.correlation_id.clone());
    server.record(event);
    outcome.reply
}

async fn get_prompt(
    server: &Arc<McpServer>,
    caller: &Caller,
    request: &Request<'_>,
    params: &mut Value,
    name: &str,
) -> Outcome {
    if name.is_empty() {
        return request.error(rpc::INVALID_PARAMS, "prompts/get needs params.name (a string)".into(), None);
    }
    let Some(prompt) = server.prompts_resources.prompt(name) else {
        let visible =
            server.prompts_resources.prompts.iter().filter(|p| p.visible_to(caller.tier)).map(|p| p.meta.name);
        let hint = match toolgate_policy::closest(name, visible).first() {
            Some(close) => format!("did you mean `{close}`?"),
            None => "prompts/list shows the prompts this token may get".into(),
        };
        let data = json!({"correlation_id": request.correlation_id});
        return request.error(
            rpc::INVALID_PARAMS,
            format!("Unknown prompt: {}; {hint}", truncated(name, 128)),
            Some(data),
        );
    };
    if let Err(denial) = server.gate.authorize_prompt_resource(caller, prompt.meta) {
        return request.denied(server, denial);
    }
    let arguments = match params.get_mut("arguments").map(Value::take) {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(a)) => a,
        Some(_) => {
            return request.error(rpc::INVALID_PARAMS, "params.arguments must be an object of strings".into(), None);
        }
    };
    let values = match render::check_arguments(&prompt.spec, &arguments) {
        Ok(values) => values,
        Err(e) => {
            let data = json!({"correlation_id": request.correlation_id});
            return request.error(rpc::INVALID_PARAMS, e.to_string(), Some(data));
        }
    };
    let answers = match &prompt.spec.ask {
        None => Map::new(),
        Some(question) => {
            let retry = Retry::take(params);
            match ask(server, caller, request, prompt.meta.name, &arguments, question, retry).await {
                Ok(answers) => answers,
                Err(outcome) => return outcome,
            }
        }
    };
    let mut rendered = render::render(&prompt.spec, &values, &answers);
    // A resource read through an agent-data tool is noted like a call to one.
    let mut read = Vec::new();
    for message in &rendered {
        if let Content::Resource { uri } = &message.content {
            match resources::read_contents(server, caller, request, uri).await {
                Ok(contents) => read.push(contents),
                Err(outcome) => return outcome,
            }
        }
    }
    if read.iter().any(|contents| contents["_meta"].get(untrusted::META_KEY).is_some()) {
        render::note_agent_data(&mut rendered);
    }
    let mut read = read.into_iter();
    let mut messages = Vec::new();
    for message in rendered {
        let content = match message.content {
            Content::Text(text) => json!({"type": "text", "text": text}),
            Content::Image { data, mime_type } => json!({"type": "image", "data": data, "mimeType": mime_type}),
            Content::Resource { .. } => json!({"type": "resource", "resource": read.next()}),
        };
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        messages.push(json!({"role": role, "content": content}));
    }
    let result = json!({"description": prompt.spec.description, "messages": messages});
    Outcome {
        reply: request.era.success(request.id, server, result),
        result: AuditOutcome::Success,
        detail: format!("rendered with {} argument(s)", arguments.len()),
    }
}

/// The prompt's question to the client's user: 2026-07-28 asks with `input_required` (the
/// answers come back with the retry); the handshake era has no stream on prompts/get.
async fn ask(
    server: &McpServer,
    caller: &Caller,
    request: &Request<'_>,
    name: &'static str,
    arguments: &Map<String, Value>,
    question: &toolgate_domain::prompts_resources::PromptQuestion,
    retry: Retry,
) -> Result<Map<String, Value>, Outcome> {
    if !request.era.asks_in_rounds() {
        let message = format!(
            "prompt `{name}` asks its user a question first, which prompts/get can do only in protocol 2026-07-28 (input_required)"
        );
        return Err(request.error(rpc::INVALID_REQUEST, message, None));
    }
    let round = retry.round(server, caller, request, "prompts/get", name, &Value::Object(arguments.clone())).await?;
    let client = ClientRequests::new(round.channel.clone());
    let params = json!({"mode": "form", "message": question.message, "requestedSchema": question.requested_schema});
    let asked = match client.ask(&question.key, ClientMethod::Elicitation, params).await {
        Ok(answer) => Elicited::parse(&question.key, &answer),
        Err(e) => Err(e),
    };
    match asked {
        Ok(answer) if answer.action == toolgate_domain::ElicitAction::Accept => Ok(answer.content.unwrap_or_default()),
        Ok(answer) => Err(request.error(
            rpc::INVALID_REQUEST,
            format!("prompt `{name}` was not rendered: its user answered `{}`", answer.action.as_str()),
            None,
        )),
        Err(e) => Err(asking::unanswered(server, request, Some(&round), e)),
    }
}

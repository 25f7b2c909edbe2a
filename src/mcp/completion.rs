//! `completion/complete`: values for a prompt's argument or a resource template's variable,
//! from the enum or the source the catalogue names, filtered by what the caller may see.

use serde_json::{Value, json};
use toolgate_domain::Caller;
use toolgate_domain::prompts_resources::CompletionSource;

use super::era::Era;
use super::jsonrpc as rpc;
use super::request::{Listeners, Request};
use super::{McpServer, Reply};
use crate::prompts_resources::values;

/// The most values one answer carries (MCP's limit).
const MAX_VALUES: usize = 100;

pub async fn complete(server: &McpServer, caller: &Caller, id: &Value, params: Option<&Value>, era: &Era) -> Reply {
    let request = Request { id, era, correlation_id: server.correlation_id(), listeners: Listeners::default() };
    let invalid = |message: String| request.error(rpc::INVALID_PARAMS, message, None).reply;
    let reference = params.and_then(|p| p.get("ref"));
    let argument = params.and_then(|p| p.get("argument"));
    let (Some(name), Some(typed)) = (
        argument.and_then(|a| a.get("name")).and_then(Value::as_str),
        argument.and_then(|a| a.get("value")).and_then(Value::as_str),
    ) else {
        return invalid("completion/complete needs params.argument with `name` and `value` (strings)".into());
    };
    let context = params.and_then(|p| p.pointer("/context/arguments")).cloned().unwrap_or(Value::Null);
    // (the item's gate, an enum's members, the named source)
    let (meta, members, source) = match reference.and_then(|r| r.get("type")).and_then(Value::as_str) {
        Some("ref/prompt") => {
            let prompt_name = reference.and_then(|r| r.get("name")).and_then(Value::as_str).unwrap_or_default();
            let Some(prompt) = server.prompts_resources.prompt(prompt_name) else {
                return invalid(format!(
                    "Unknown prompt: {prompt_name}; prompts/list shows the prompts this token may get"
                ));
            };
            let Some(declared) = prompt.spec.arguments.iter().find(|a| a.name == name) else {
                let known: Vec<&str> = prompt.spec.arguments.iter().map(|a| a.name.as_str()).collect();
                return invalid(format!(
                    "prompt `{prompt_name}` has no argument `{name}` (it has: {})",
                    known.join(", ")
                ));
            };
            let members: Option<Vec<String>> = declared
                .schema
                .get("enum")
                .and_then(Value::as_array)
                .map(|m| m.iter().filter_map(Value::as_str).map(str::to_string).collect());
            (prompt.meta, members, declared.complete)
        }
        Some("ref/resource") => {
            let template = reference.and_then(|r| r.get("uri")).and_then(Value::as_str).unwrap_or_default();
            let Some(found) = server.prompts_resources.templates.iter().find(|t| t.spec.uri_template == template)
            else {
                return invalid(format!(
                    "no resource template `{template}`; resources/templates/list shows the templates this token may read"
                ));
            };
            if !found.spec.variables().contains(&name) {
                return invalid(format!("template `{template}` has no variable `{name}`"));
            }
            (found.meta, None, found.spec.complete.get(name).copied())
        }
        _ => return invalid("params.ref.type must be `ref/prompt` or `ref/resource`".into()),
    };
    if let Err(denial) = server.gate.authorize_prompt_resource(caller, meta) {
        return request.denied(server, denial).reply;
    }
    let candidates = match (members, source) {
        (Some(members), _) => members,
        (None, Some(source)) => match offered(server, caller, source, &context).await {
            Ok(values) => values,
            Err(e) => {
                let data = json!({"correlation_id": request.correlation_id, "retry_after_ms": 2000});
                return request
                    .error(rpc::INTERNAL_ERROR, format!("completion failed reading the store: {e}"), Some(data))
                    .reply;
            }
        },
        (None, None) => Vec::new(),
    };
    let wanted = typed.to_lowercase();
    let matching: Vec<String> = candidates.into_iter().filter(|c| c.to_lowercase().starts_with(&wanted)).collect();
    let total = matching.len();
    let shown: Vec<String> = matching.into_iter().take(MAX_VALUES).collect();
    let result = json!({"completion": {"values": shown, "total": total, "hasMore": total > MAX_VALUES}});
    era.success(id, server, result)
}

async fn offered(
    server: &McpServer,
    caller: &Caller,
    source: CompletionSource,
    context: &Value,
) -> Result<Vec<String>, toolgate_domain::StoreError> {
    let services = server.services();
    let Some(reach) = values::reach_of(services, &server.gate, caller, source) else { return Ok(Vec::new()) };
    let given = |key: &str| context.get(key).and_then(Value::as_str).map(str::to_string);
    values::all(services, caller, &reach, source, &given).await
}

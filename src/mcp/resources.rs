//! `resources/list`, `resources/templates/list`, `resources/read` in both eras, and the
//! handshake era's `resources/subscribe` / `unsubscribe`. A read passes the same tier and
//! RBAC gate as a tool: its own pair, or, for a template read through a tool, that tool's
//! whole gate and handler.

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{Map, Value, json};
use toolgate_domain::audit::{AuditEvent, AuditOutcome, TargetType};
use toolgate_domain::groups::Reach;
use toolgate_domain::prompts_resources::{BuiltinResource, TemplateSpec};
use toolgate_domain::redact::truncated;
use toolgate_domain::targets::Targets;
use toolgate_domain::{Caller, Denial, ToolContext, ToolError, ToolOutput};

use super::era::Era;
use super::jsonrpc as rpc;
use super::lists::{refuse_cursor, with_cache_hints};
use super::request::{Listeners, Outcome, Request};
use super::{LIST_TTL_MS, McpServer, Reply};
use crate::prompts_resources::{Item, Located, builtin, uri, values};
use crate::registry::ToolId;
use crate::tools::dispatch;

/// How long a client may cache a read whose content is fixed in the catalogue.
const FIXED_TTL_MS: u64 = LIST_TTL_MS;

fn request<'a>(server: &McpServer, id: &'a Value, era: &'a Era) -> Request<'a> {
    Request { id, era, correlation_id: server.correlation_id(), listeners: Listeners::default() }
}

/// -32602 "Resource not found" with the URI in `data` (SEP-2164), and what to do.
fn not_found(request: &Request<'_>, target: &str, why: &str) -> Outcome {
    let data = json!({"uri": target, "correlation_id": request.correlation_id,
                      "remediation": "resources/list and resources/templates/list show what this token may read"});
    request.error(rpc::INVALID_PARAMS, format!("Resource not found: {}{why}", truncated(target, 256)), Some(data))
}

pub async fn list(server: &McpServer, caller: &Caller, id: &Value, params: Option<&Value>, era: &Era) -> Reply {
    let request = request(server, id, era);
    if let Some(refusal) = refuse_cursor(&request, "resources/list", params) {
        return refusal;
    }
    let mut listed = server.prompts_resources.resources_json(caller.tier);
    for template in server
        .prompts_resources
        .templates
        .iter()
        .filter(|t| server.gate.authorize_prompt_resource(caller, t.meta).is_ok())
    {
        match instances(server, caller, template).await {
            Ok(mut more) => listed.append(&mut more),
            Err(e) => {
                tracing::error!("resources/list could not enumerate {}: {e}", template.spec.name);
                let data = json!({"correlation_id": request.correlation_id, "retry_after_ms": 2000});
                let message = format!("resources/list failed reading the store: {e}");
                return request.error(rpc::INTERNAL_ERROR, message, Some(data)).reply;
            }
        }
    }
    era.success(id, server, with_cache_hints(era, json!({"resources": listed}), 0))
}

/// A template's instances the caller may read, each as a listed resource.
async fn instances(
    server: &McpServer,
    caller: &Caller,
    template: &Item<TemplateSpec>,
) -> Result<Vec<Value>, toolgate_domain::StoreError> {
    let spec = &template.spec;
    let Some(source) = spec.list else { return Ok(Vec::new()) };
    let services = server.services();
    let Some(reach) = values::reach_of(services, &server.gate, caller, source) else { return Ok(Vec::new()) };
    let variable = spec.variables().first().map(|v| v.to_string()).unwrap_or_default();
    let all = values::all(services, caller, &reach, source, &|_| None).await?;
    Ok(all
        .into_iter()
        .map(|value| {
            json!({"uri": uri::expand(&spec.uri_template, &[(&variable, &value)]),
                   "name": format!("{}/{value}", spec.name), "title": format!("{}: {value}", spec.title),
                   "description": spec.description, "mimeType": spec.mime_type})
        })
        .collect())
}

pub fn templates(server: &McpServer, caller: &Caller, id: &Value, params: Option<&Value>, era: &Era) -> Reply {
    let request = request(server, id, era);
    if let Some(refusal) = refuse_cursor(&request, "resources/templates/list", params) {
        return refusal;
    }
    let listed = server.prompts_resources.templates_json(caller.tier);
    era.success(id, server, with_cache_hints(era, json!({"resourceTemplates": listed}), LIST_TTL_MS))
}

pub async fn read(server: &Arc<McpServer>, caller: &Caller, id: &Value, params: Option<&Value>, era: &Era) -> Reply {
    let request = request(server, id, era);
    let target = params.and_then(|p| p.get("uri")).and_then(Value::as_str).unwrap_or_default();
    let outcome = match target {
        "" => request.error(rpc::INVALID_PARAMS, "resources/read needs params.uri (a string)".into(), None),
        _ => match read_contents(server, caller, &request, target).await {
            Ok(contents) => {
                let ttl = match server.prompts_resources.locate(target) {
                    Some(Located::Fixed(r)) if r.spec.builtin.is_none() => FIXED_TTL_MS,
                    _ => 0,
                };
                let result = with_cache_hints(era, json!({"contents": [contents]}), ttl);
                Outcome { reply: era.success(id, server, result), result: AuditOutcome::Success, detail: "read".into() }
            }
            Err(outcome) => outcome,
        },
    };
    // An instance's variables name what it is about (`agent://{agent_id}`), as a call's
    // arguments do.
    let about = match server.prompts_resources.locate(target) {
        Some(Located::Instance(_, values)) => {
            let variables: serde_json::Map<String, Value> =
                values.into_iter().map(|(k, v)| (k, Value::String(v))).collect();
            Targets::of(&Value::Object(variables)).agents
        }
        _ => vec![],
    };
    let event = AuditEvent::new(server.now_ms(), "mcp.resources/read", outcome.result)
        .by(caller)
        .target(TargetType::McpResource, truncated(target, 512).to_string())
        .detail(truncated(&outcome.detail, 1024).to_string())
        .correlation(request.correlation_id.clone())
        .about_agents(about);
    server.record(event);
    outcome.reply
}

/// One read, gated: the `contents` item (`uri`, `mimeType`, `text` or `blob`).
pub(super) async fn read_contents(
    server: &Arc<McpServer>,
    caller: &Caller,
    request: &Request<'_>,
    target: &str,
) -> Result<Value, Outcome> {
    let contents = |mime: &str, key: &str, body: Value| {
        let mut item = Map::new();
        item.insert("uri".into(), json!(target));
        item.insert("mimeType".into(), json!(mime));
        item.insert(key.into(), body);
        Value::Object(item)
    };
    match server.prompts_resources.locate(target) {
        None => Err(not_found(request, target, "")),
        Some(Located::Fixed(resource)) => {
            let reach = gate(server, caller, request, resource.meta)?;
            let spec = &resource.spec;
            Ok(match (&spec.text, &spec.blob, spec.builtin) {
                (Some(text), _, _) => contents(&spec.mime_type, "text", json!(text)),
                (_, Some(blob), _) => contents(&spec.mime_type, "blob", json!(blob)),
                (_, _, Some(BuiltinResource::ServerHealth)) => {
                    let health = builtin::server_health(server.services(), server.sessions.count(), &reach).await;
                    contents(&spec.mime_type, "text", json!(health.to_string()))
                }
                (_, _, Some(BuiltinResource::PolicyMatrix)) => {
                    contents(&spec.mime_type, "text", json!(crate::registry::POLICY_MATRIX_MD))
                }
                _ => return Err(not_found(request, target, ": it has no content")),
            })
        }
        Some(Located::Instance(template, vars)) => {
            let spec = &template.spec;
            if let Some(tool) = &spec.tool {
                let text = through_tool(server, caller, request, target, tool, &vars).await?;
                let mut read = contents(&spec.mime_type, "text", json!(text));
                // The JSON stays as it is (its MIME type says JSON); `_meta` says agents wrote some.
                if ToolId::from_name(tool).is_some_and(|id| id.meta().agent_data) {
                    read["_meta"] = json!({crate::untrusted::META_KEY: crate::untrusted::meta()});
                }
                return Ok(read);
            }
            gate(server, caller, request, template.meta)?;
            if let Some(text) = &spec.text {
                let json_type = spec.mime_type.ends_with("json");
                let filled = vars.iter().fold(text.clone(), |text, (name, value)| {
                    let shown = match json_type {
                        // Inside a JSON string: escaped, without its quotes.
                        true => serde_json::to_string(value).map(|q| q[1..q.len() - 1].to_string()).unwrap_or_default(),
                        false => value.clone(),
                    };
                    text.replace(&format!("{{{name}}}"), &shown)
                });
                return Ok(contents(&spec.mime_type, "text", json!(filled)));
            }
            // tool_documentation: the tools this caller's tier is shown, no others.
            let catalogue = server.services().catalogue();
            let name = vars.first().map(|(_, v)| v.as_str()).unwrap_or_default();
            match catalogue.tools.iter().find(|t| t.name == name) {
                Some(tool) if catalogue.decision(tool, caller.tier) != toolgate_policy::Decision::Deny => {
                    Ok(contents(&spec.mime_type, "text", json!(builtin::tool_documentation(catalogue, tool))))
                }
                _ => Err(not_found(request, target, ": no tool of that name is on this token's tools/list")),
            }
        }
    }
}

fn gate(
    server: &McpServer,
    caller: &Caller,
    request: &Request<'_>,
    meta: &'static toolgate_domain::catalogue::PromptResourceMeta,
) -> Result<Reach, Outcome> {
    server.gate.authorize_prompt_resource(caller, meta).map_err(|denial| request.denied(server, denial))
}

/// A template read through its tool: the tool's gate (tier, RBAC, arguments), its handler,
/// and its structured result as the content.
async fn through_tool(
    server: &Arc<McpServer>,
    caller: &Caller,
    request: &Request<'_>,
    target: &str,
    tool: &str,
    vars: &[(String, String)],
) -> Result<String, Outcome> {
    let id = ToolId::from_name(tool).expect("the build checked the template's tool");
    let arguments: Map<String, Value> = vars.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    let passed = match server.gate.pass(caller, id.meta(), Value::Object(arguments)).await {
        Ok(passed) => passed,
        Err(Denial::InvalidArguments(invalid)) => {
            return Err(not_found(request, target, &format!(": {}", invalid.message())));
        }
        Err(denial) => return Err(request.denied(server, denial)),
    };
    let ctx = ToolContext::builder(server.services.clone())
        .caller(caller.clone())
        .reach(passed.reach)
        .correlation_id(request.correlation_id.clone())
        .cancellation(server.call_cancellation())
        .build();
    match dispatch(id, &ctx, passed.arguments).await {
        Ok(ToolOutput::Structured(value) | ToolOutput::Summarized { structured: value, .. }) => {
            Ok(serde_json::to_string(&value).expect("JSON values serialize"))
        }
        Ok(ToolOutput::Static(raw)) => Ok(raw.to_string()),
        Err(ToolError::NotFound(message) | ToolError::InvalidArguments(message)) => {
            Err(not_found(request, target, &format!(": {message}")))
        }
        Err(e) => {
            tracing::error!(correlation_id = %request.correlation_id, tool, "a resource read failed: {e}");
            let data = json!({"correlation_id": request.correlation_id, "retry_after_ms": 2000});
            Err(request.error(
                rpc::INTERNAL_ERROR,
                format!("reading {} failed: {e}", truncated(target, 256)),
                Some(data),
            ))
        }
    }
}

/// `resources/subscribe` and `unsubscribe` (handshake era, in a session): a subscribed
/// resource's changes arrive as `notifications/resources/updated` on the session's GET stream.
/// Subscribing reads the resource first, as `resources/read` would: another principal's
/// execution cannot be followed (its notifications would tell that it exists and changes).
pub async fn subscription(
    server: &Arc<McpServer>,
    caller: &Caller,
    id: &Value,
    params: Option<&Value>,
    session_id: Option<&str>,
    subscribe: bool,
) -> Reply {
    let era = Era::Handshake { version: String::new(), session: None };
    let request = request(server, id, &era);
    let target = params.and_then(|p| p.get("uri")).and_then(Value::as_str).unwrap_or_default();
    if target.is_empty() {
        return request.error(rpc::INVALID_PARAMS, "needs params.uri (a string)".into(), None).reply;
    }
    let Some(session_id) = session_id else {
        let message = "subscriptions live in a session: initialize first and send its Mcp-Session-Id";
        return Reply::error(StatusCode::OK, id, rpc::INVALID_REQUEST, message, None);
    };
    // The same gate (and, for a template read through a tool, the same confined read) as a read.
    if subscribe {
        if let Err(outcome) = read_contents(server, caller, &request, target).await {
            return outcome.reply;
        }
    } else {
        let meta = match server.prompts_resources.locate(target) {
            None => return not_found(&request, target, "").reply,
            Some(Located::Fixed(r)) => r.meta,
            Some(Located::Instance(t, _)) => t.meta,
        };
        if let Err(outcome) = gate(server, caller, &request, meta) {
            return outcome.reply;
        }
    }
    let known = server.sessions.subscribe(session_id, &caller.principal.name, target, subscribe);
    if !known {
        return super::handshake::session_not_found(server, id, "session not found: it expired or was ended");
    }
    Reply::json(StatusCode::OK, rpc::result_raw(id, "{}"))
}

impl McpServer {
    /// Until `stop`: tells each session subscribed to an execution's or an approval ticket's
    /// resource that it changed, as its agents' responses are stored or a person decides
    /// (`notifications/resources/updated` on its GET stream).
    pub async fn forward_resource_updates(self: Arc<Self>, stop: toolgate_domain::CancellationToken) {
        let mut updates = super::changing::Updates::new(&self);
        let templates = super::changing::followable(&self);
        loop {
            let (kind, id) = tokio::select! {
                _ = stop.cancelled() => return,
                update = updates.recv() => match update {
                    Ok(changed) => changed,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "resource update notifications fell behind; some were not sent");
                        continue;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                },
            };
            for target in super::changing::uris(&templates, kind, &id) {
                let rings = self.sessions.subscribers(&target);
                if rings.is_empty() {
                    continue;
                }
                let note =
                    json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": target}});
                let text = note.to_string();
                for ring in rings {
                    ring.push(super::replay::CHANNEL, text.as_str(), false);
                }
            }
        }
    }
}

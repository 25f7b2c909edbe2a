//! tools/call, in the gate's order: kill switch, known tool, (stateless: headers and client
//! capabilities), tier, RBAC, arguments, human approval, handler. Every outcome is audited
//! with the correlation id the client sees.

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Map, Value, json};

use super::jsonrpc::{self as rpc};
use super::protocol::{Caller, META_SERVER_INFO, Reply, header_value};
use super::{AppState, IS_ERROR_FOR_ARGUMENTS_FROM};
use crate::catalogue::{Decision, OperationClass};
use crate::gate::{self, Refusal, approval};
use crate::registry::{ToolId, dispatch};
use crate::store::AuditEntry;
use crate::tool::{Principal, ToolContext, ToolError, ToolOutput};

/// Which era the call came in on, and what that changes.
pub struct Era {
    pub stateless: bool,
    pub version: String,
    /// The capabilities the client declared (this request's, or its session's).
    pub client_capabilities: Option<Value>,
}

impl Era {
    /// From 2025-11-25 on, bad arguments are a tool result the model can read (`isError`).
    fn arguments_as_tool_result(&self) -> bool {
        self.stateless || self.version.as_str() >= IS_ERROR_FOR_ARGUMENTS_FROM
    }

    fn status(&self, code: i64) -> StatusCode {
        match (self.stateless, code) {
            (true, rpc::INVALID_PARAMS | rpc::HEADER_MISMATCH | rpc::MISSING_CLIENT_CAPABILITY) => {
                StatusCode::BAD_REQUEST
            }
            _ => StatusCode::OK,
        }
    }

    fn success(&self, id: &Value, state: &AppState, mut result: Value) -> Reply {
        if self.stateless
            && let Some(obj) = result.as_object_mut()
        {
            obj.insert("resultType".into(), json!("complete"));
            obj.insert("_meta".into(), json!({META_SERVER_INFO: state.server_info}));
        }
        Reply::json(StatusCode::OK, rpc::result(id, &result))
    }
}

/// A finished call: what the client gets and what the audit row says.
struct Outcome {
    reply: Reply,
    /// `success`, `denied`, `failure`, `pending`.
    result: &'static str,
    detail: String,
}

impl Outcome {
    fn refused(era: &Era, id: &Value, correlation_id: &str, refusal: Refusal, audit_detail: Option<String>) -> Self {
        let mut data = json!({
            "correlation_id": correlation_id,
            "retry_after_ms": refusal.retry_after_ms,
            "remediation": refusal.remediation,
        });
        if let (Some(obj), Some(extra)) = (data.as_object_mut(), refusal.data.as_ref().and_then(Value::as_object)) {
            obj.extend(extra.clone());
        }
        let result = if refusal.code == rpc::APPROVAL_REQUIRED { "pending" } else { "denied" };
        let detail = audit_detail.unwrap_or_else(|| format!("{}: {}", refusal.code, refusal.message));
        Outcome {
            reply: Reply::error(era.status(refusal.code), id, refusal.code, &refusal.message, Some(data)),
            result,
            detail,
        }
    }
}

pub async fn tools_call(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    id: &Value,
    params: Option<Value>,
    era: &Era,
) -> Reply {
    let correlation_id = state.correlation_id();
    let params = params.unwrap_or(Value::Null);
    let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
    let arguments = params.get("arguments").cloned();
    let outcome = call(state, caller, headers, id, &name, arguments.clone(), era, &correlation_id).await;
    let target = arguments.map(|a| truncate(&approval::canonical_arguments(&a), 512));
    state.audit.record(AuditEntry {
        at_ms: state.clock.now_ms(),
        principal: Some(caller.principal.name.clone()),
        token_id: Some(caller.token.id.clone()),
        action: format!("mcp.{}", truncate(&name, 128)),
        target,
        result: outcome.result.to_string(),
        detail: Some(truncate(&outcome.detail, 1024)),
        correlation_id: Some(correlation_id),
    });
    outcome.reply
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[allow(clippy::too_many_arguments)]
async fn call(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    id: &Value,
    name: &str,
    arguments: Option<Value>,
    era: &Era,
    correlation_id: &str,
) -> Outcome {
    let protocol_error = |code: i64, message: String, data: Option<Value>| Outcome {
        detail: format!("{code}: {message}"),
        reply: Reply::error(era.status(code), id, code, &message, data),
        result: "denied",
    };
    if name.is_empty() {
        return protocol_error(rpc::INVALID_PARAMS, "tools/call needs params.name (a string)".into(), None);
    }
    let arguments = match arguments {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(a @ Value::Object(_)) => a,
        Some(_) => return protocol_error(rpc::INVALID_PARAMS, "params.arguments must be an object".into(), None),
    };
    // 1. Kill switch: read-only mode refuses every tool that is not read-class, for every tier.
    let tool = ToolId::from_name(name);
    if state.config.read_only && tool.is_some_and(|t| t.meta().class != OperationClass::Read) {
        return Outcome::refused(era, id, correlation_id, gate::read_only_mode(name), None);
    }
    // 2. The tool is known.
    let Some(tool) = tool else {
        let (message, suggestions) = unknown_tool(state, caller, name);
        return protocol_error(
            rpc::INVALID_PARAMS,
            message,
            Some(json!({"suggestions": suggestions, "correlation_id": correlation_id})),
        );
    };
    if era.stateless
        && let Err(message) = check_param_headers(state, tool, headers, &arguments)
    {
        return Outcome {
            detail: message.clone(),
            reply: Reply::error(StatusCode::BAD_REQUEST, id, rpc::HEADER_MISMATCH, &message, None),
            result: "denied",
        };
    }
    if let Some(required) = &state.required_capabilities[tool.index()] {
        let declared = era.client_capabilities.as_ref();
        let missing: Vec<&str> = required
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .filter(|k| declared.and_then(|d| d.get(*k)).is_none())
            .collect();
        if !missing.is_empty() {
            let message = format!("{name} needs the client capabilities: {}", missing.join(", "));
            return protocol_error(
                rpc::MISSING_CLIENT_CAPABILITY,
                message,
                Some(json!({"requiredCapabilities": required})),
            );
        }
    }
    // 3-4. Tier, then RBAC.
    let decision = match gate::authorize(caller.tier, &caller.principal.roles, tool) {
        Ok(d) => d,
        Err(refusal) => return Outcome::refused(era, id, correlation_id, refusal, None),
    };
    // 5. Arguments, before any approval is looked up, minted or consumed.
    let problems = argument_problems(state, tool, &arguments);
    if !problems.is_empty() {
        return invalid_arguments(state, era, id, tool, correlation_id, problems);
    }
    // 6. Human approval: the ticket, then the recall. `approval_id` is toolgate's argument
    // only on gated tools (it is in their published schema); elsewhere it is the tool's own.
    let mut arguments = arguments;
    let approval_id = match tool.meta().approval_gated {
        true => arguments
            .as_object_mut()
            .and_then(|o| o.remove(gate::APPROVAL_ID))
            .and_then(|v| v.as_str().map(str::to_string)),
        false => None,
    };
    let mut approved_by = None;
    if decision == Decision::ApprovalRequired {
        match approval::check(state, &caller.principal.name, tool, &arguments, approval_id.as_deref()) {
            Ok(a) => approved_by = Some(a),
            Err(e) => return Outcome::refused(era, id, correlation_id, e.refusal, Some(e.audit_detail)),
        }
    }
    // 7. The handler.
    let ctx = ToolContext {
        principal: Principal { name: caller.principal.name.clone(), roles: caller.principal.roles.clone() },
        tier: caller.tier,
        token_id: caller.token.id.clone(),
        correlation_id: correlation_id.to_string(),
        store: state.store.clone(),
        clock: state.clock.clone(),
    };
    let approved =
        approved_by.map(|a| format!("approval {} by {}; ", a.id, a.reviewer.unwrap_or_default())).unwrap_or_default();
    match dispatch(tool, &ctx, arguments).await {
        Ok(ToolOutput::Structured(value)) => {
            if cfg!(debug_assertions)
                && let Some(validator) = &state.output_validators[tool.index()]
                && let Some(e) = validator.iter_errors(&value).next()
            {
                let message =
                    format!("{name} returned a result that breaks its outputSchema at {}: {e}", e.instance_path());
                return Outcome {
                    detail: message.clone(),
                    reply: Reply::error(
                        StatusCode::OK,
                        id,
                        rpc::INTERNAL_ERROR,
                        &message,
                        Some(json!({"correlation_id": correlation_id})),
                    ),
                    result: "failure",
                };
            }
            let text = serde_json::to_string(&value).expect("JSON values serialize");
            Outcome {
                reply: era.success(
                    id,
                    state,
                    json!({"content": [{"type": "text", "text": text}], "structuredContent": value, "isError": false}),
                ),
                result: "success",
                detail: format!("{approved}ran"),
            }
        }
        Ok(ToolOutput::Static(raw)) => {
            let result: Value = serde_json::from_str(raw).expect("generated JSON");
            let failed = result["isError"] == true;
            Outcome {
                reply: era.success(id, state, result),
                result: if failed { "failure" } else { "success" },
                detail: format!("{approved}static result"),
            }
        }
        Err(ToolError::Refused { message, remediation }) => {
            let refusal =
                Refusal { code: rpc::PERMISSION_DENIED, message, remediation, retry_after_ms: None, data: None };
            Outcome::refused(era, id, correlation_id, refusal, None)
        }
        Err(e) if e.is_internal() => {
            tracing::error!(%correlation_id, tool = name, "tool failed: {e}");
            let data = json!({"correlation_id": correlation_id, "retry_after_ms": gate::RETRY_AFTER_STORE_FAULT_MS, "remediation": "a transient store fault; retry in a few seconds"});
            Outcome {
                detail: e.to_string(),
                reply: Reply::error(
                    StatusCode::OK,
                    id,
                    rpc::INTERNAL_ERROR,
                    &format!("{name} failed: {e}"),
                    Some(data),
                ),
                result: "failure",
            }
        }
        Err(e) => Outcome {
            detail: format!("{approved}{e}"),
            reply: era.success(
                id,
                state,
                json!({"content": [{"type": "text", "text": e.to_string()}], "isError": true}),
            ),
            result: "failure",
        },
    }
}

fn unknown_tool(state: &AppState, caller: &Caller, name: &str) -> (String, Vec<String>) {
    let visible: Vec<&str> = ToolId::ALL
        .iter()
        .filter(|t| state.config.list_all_tools || gate::tier::decision_for_tool(caller.tier, **t) != Decision::Deny)
        .map(|t| t.meta().name)
        .collect();
    let suggestions: Vec<String> =
        toolgate_policy::closest(name, visible.iter().copied()).into_iter().map(str::to_string).collect();
    let hint = match suggestions.first() {
        Some(s) => format!("; did you mean `{s}`?"),
        None => "; tools/list shows the tools this token may call".into(),
    };
    (format!("Unknown tool: {name}{hint}"), suggestions)
}

/// One problem with the arguments: where (JSON pointer) and what.
struct Problem {
    pointer: String,
    message: String,
}

fn argument_problems(state: &AppState, tool: ToolId, arguments: &Value) -> Vec<Problem> {
    let mut problems: Vec<Problem> = state.validators[tool.index()]
        .iter_errors(arguments)
        .map(|e| Problem { pointer: e.instance_path().as_str().to_string(), message: e.to_string() })
        .collect();
    non_integers(&state.input_schemas[tool.index()], arguments, String::new(), &mut problems);
    problems
}

/// JSON Schema counts 1.0 as an integer; toolgate does not (no silent truncation).
fn non_integers(schema: &Value, value: &Value, pointer: String, out: &mut Vec<Problem>) {
    if schema.get("type").and_then(Value::as_str) == Some("integer") && value.as_number().is_some_and(|n| n.is_f64()) {
        out.push(Problem {
            pointer: pointer.clone(),
            message: format!("{value} is not an integer (write it without a fraction or exponent)"),
        });
    }
    match value {
        Value::Object(obj) => {
            for (k, v) in obj {
                if let Some(s) = schema.get("properties").and_then(|p| p.get(k)) {
                    non_integers(s, v, format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1")), out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    non_integers(s, v, format!("{pointer}/{i}"), out);
                }
            }
        }
        _ => {}
    }
}

fn invalid_arguments(
    state: &AppState,
    era: &Era,
    id: &Value,
    tool: ToolId,
    correlation_id: &str,
    problems: Vec<Problem>,
) -> Outcome {
    let meta = tool.meta();
    let required = state.input_schemas[tool.index()].get("required").cloned().unwrap_or(json!([]));
    let example = meta.example_arguments.map(|e| serde_json::from_str::<Value>(e).expect("generated JSON"));
    let lines: Vec<String> = problems
        .iter()
        .map(|p| format!("{}: {}", if p.pointer.is_empty() { "(arguments)" } else { &p.pointer }, p.message))
        .collect();
    let remediation = match &example {
        Some(e) => format!("fix the arguments named above; required: {required}; a minimal valid call: {e}"),
        None => format!("fix the arguments named above; required: {required}"),
    };
    let details = json!({
        "error": "invalid_arguments",
        "errors": problems.iter().map(|p| json!({"pointer": p.pointer, "message": p.message})).collect::<Vec<_>>(),
        "required": required,
        "example": example,
        "correlation_id": correlation_id,
        "retry_after_ms": Value::Null,
        "remediation": remediation,
    });
    let message = format!("invalid arguments for {}: {}", meta.name, lines.join("; "));
    let reply = if era.arguments_as_tool_result() {
        let text = format!("{message}. {remediation}");
        era.success(
            id,
            state,
            json!({"content": [{"type": "text", "text": text}], "structuredContent": details, "isError": true}),
        )
    } else {
        Reply::error(StatusCode::OK, id, rpc::INVALID_PARAMS, &message, Some(details))
    };
    Outcome { reply, result: "denied", detail: message }
}

/// 2026-07-28 `x-mcp-header`: each annotated argument that is present must be mirrored in
/// its `Mcp-Param-<Name>` header, byte for byte after decoding.
fn check_param_headers(state: &AppState, tool: ToolId, headers: &HeaderMap, arguments: &Value) -> Result<(), String> {
    let Some(props) = state.input_schemas[tool.index()].get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    for (prop, prop_schema) in props {
        let Some(name) = prop_schema.get("x-mcp-header").and_then(Value::as_str) else { continue };
        let value = match arguments.get(prop) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => s.clone(),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) => match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 => format!("{}", f as i64),
                _ => n.to_string(),
            },
            Some(other) => other.to_string(),
        };
        let header = format!("mcp-param-{}", name.to_ascii_lowercase());
        let sent = headers
            .get(&header)
            .ok_or_else(|| format!("the Mcp-Param-{name} header is required: argument `{prop}` is present"))?;
        let sent = sent.to_str().map_err(|_| {
            format!("Mcp-Param-{name} has characters a header value cannot carry; use the =?base64?…?= form")
        })?;
        let decoded = header_value(sent.trim()).map_err(|_| format!("Mcp-Param-{name} is not valid base64"))?;
        if decoded != value {
            return Err(format!("Mcp-Param-{name} `{decoded}` does not match argument `{prop}`"));
        }
    }
    Ok(())
}

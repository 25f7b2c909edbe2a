//! tools/call: find the tool, check the request's headers and capabilities (stateless era),
//! pass the gate, validate the arguments, run the handler, shape the result for the era.

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Map, Value, json};

use super::jsonrpc::{self as rpc};
use super::protocol::{Caller, META_SERVER_INFO, Reply, header_value};
use super::{AppState, IS_ERROR_FOR_ARGUMENTS_FROM};
use crate::catalogue::Decision;
use crate::gate::{self, Refusal};
use crate::registry::{ToolId, dispatch};
use crate::tool::{Principal, ToolContext, ToolOutput};

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
        if self.stateless {
            if let Some(obj) = result.as_object_mut() {
                obj.insert("resultType".into(), json!("complete"));
                obj.insert("_meta".into(), json!({META_SERVER_INFO: state.server_info}));
            }
        }
        Reply::json(StatusCode::OK, rpc::result(id, &result))
    }
}

fn refusal_reply(era: &Era, id: &Value, correlation_id: &str, refusal: Refusal) -> Reply {
    let data = json!({
        "correlation_id": correlation_id,
        "retry_after_ms": refusal.retry_after_ms,
        "remediation": refusal.remediation,
    });
    Reply::error(era.status(refusal.code), id, refusal.code, &refusal.message, Some(data))
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
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Reply::error(
            era.status(rpc::INVALID_PARAMS),
            id,
            rpc::INVALID_PARAMS,
            "tools/call needs params.name (a string)",
            None,
        );
    };
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(a @ Value::Object(_)) => a.clone(),
        Some(_) => {
            return Reply::error(
                era.status(rpc::INVALID_PARAMS),
                id,
                rpc::INVALID_PARAMS,
                "params.arguments must be an object",
                None,
            );
        }
    };
    let Some(tool) = ToolId::from_name(name) else {
        return unknown_tool(state, caller, era, id, name);
    };
    let meta = tool.meta();
    if era.stateless {
        if let Err(message) = check_param_headers(state, tool, headers, &arguments) {
            return Reply::error(StatusCode::BAD_REQUEST, id, rpc::HEADER_MISMATCH, &message, None);
        }
    }
    if let Some(required) = meta.required_client_capabilities {
        let required: Value = serde_json::from_str(required).expect("generated JSON");
        let declared = era.client_capabilities.as_ref();
        let missing: Vec<&String> = required
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
            .filter(|k| declared.and_then(|d| d.get(k.as_str())).is_none())
            .collect();
        if !missing.is_empty() {
            let names: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
            return Reply::error(
                era.status(rpc::MISSING_CLIENT_CAPABILITY),
                id,
                rpc::MISSING_CLIENT_CAPABILITY,
                &format!("{name} needs the client capabilities: {}", names.join(", ")),
                Some(json!({"requiredCapabilities": required})),
            );
        }
    }
    let decision = match gate::authorize(caller.tier, &caller.principal.roles, tool) {
        Ok(d) => d,
        Err(refusal) => return refusal_reply(era, id, &correlation_id, refusal),
    };
    let problems = argument_problems(state, tool, &arguments);
    if !problems.is_empty() {
        return invalid_arguments(state, era, id, tool, &correlation_id, problems);
    }
    if decision == Decision::ApprovalRequired {
        return refusal_reply(era, id, &correlation_id, gate::approval_unavailable(tool));
    }
    let mut arguments = arguments;
    if let Some(obj) = arguments.as_object_mut() {
        obj.remove(toolgate_codegen::check::APPROVAL_ID);
    }
    let ctx = ToolContext {
        principal: Principal { name: caller.principal.name.clone(), roles: caller.principal.roles.clone() },
        tier: caller.tier,
        correlation_id: correlation_id.clone(),
        store: state.store.clone(),
        clock: state.clock.clone(),
    };
    match dispatch(tool, &ctx, arguments).await {
        Ok(ToolOutput::Structured(value)) => {
            if cfg!(debug_assertions) {
                if let Some(validator) = &state.output_validators[tool.index()] {
                    if let Some(e) = validator.iter_errors(&value).next() {
                        let message = format!(
                            "{name} returned a result that breaks its outputSchema at {}: {e}",
                            e.instance_path()
                        );
                        return Reply::error(
                            StatusCode::OK,
                            id,
                            rpc::INTERNAL_ERROR,
                            &message,
                            Some(json!({"correlation_id": correlation_id})),
                        );
                    }
                }
            }
            let text = serde_json::to_string(&value).expect("JSON values serialize");
            era.success(
                id,
                state,
                json!({"content": [{"type": "text", "text": text}], "structuredContent": value, "isError": false}),
            )
        }
        Ok(ToolOutput::Static(raw)) => era.success(id, state, serde_json::from_str(raw).expect("generated JSON")),
        Err(e) if e.is_internal() => {
            tracing::error!(%correlation_id, tool = name, "tool failed: {e}");
            let data = json!({"correlation_id": correlation_id, "retry_after_ms": 5000, "remediation": "a transient store fault; retry in a few seconds"});
            Reply::error(StatusCode::OK, id, rpc::INTERNAL_ERROR, &format!("{name} failed: {e}"), Some(data))
        }
        Err(e) => {
            era.success(id, state, json!({"content": [{"type": "text", "text": e.to_string()}], "isError": true}))
        }
    }
}

fn unknown_tool(state: &AppState, caller: &Caller, era: &Era, id: &Value, name: &str) -> Reply {
    let visible: Vec<&str> = ToolId::ALL
        .iter()
        .filter(|t| state.config.list_all_tools || gate::tier::decision_for_tool(caller.tier, **t) != Decision::Deny)
        .map(|t| t.meta().name)
        .collect();
    let suggestions = toolgate_codegen::diag::closest(name, visible.iter().copied());
    let hint = match suggestions.first() {
        Some(s) => format!("; did you mean `{s}`?"),
        None => "; tools/list shows the tools this token may call".into(),
    };
    Reply::error(
        era.status(rpc::INVALID_PARAMS),
        id,
        rpc::INVALID_PARAMS,
        &format!("Unknown tool: {name}{hint}"),
        Some(json!({"suggestions": suggestions})),
    )
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
) -> Reply {
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
    if era.arguments_as_tool_result() {
        let text = format!("{message}. {remediation}");
        era.success(
            id,
            state,
            json!({"content": [{"type": "text", "text": text}], "structuredContent": details, "isError": true}),
        )
    } else {
        Reply::error(StatusCode::OK, id, rpc::INVALID_PARAMS, &message, Some(details))
    }
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

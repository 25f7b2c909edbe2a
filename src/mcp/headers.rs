//! 2026-07-28 header values: the strict `=?base64?…?=` form, and the `x-mcp-header` rule that
//! mirrors annotated arguments in `Mcp-Param-*` headers.

use axum::http::{HeaderMap, HeaderName};
use base64::Engine as _;
use serde_json::Value;

pub const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
pub const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
pub const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
/// 2026-07-28: the method and the tool (or prompt, or resource) name, mirrored from the body.
pub const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
pub const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

/// A header's value, trimmed; a value that is not text reads as U+FFFD (it then mismatches).
pub fn header(headers: &HeaderMap, name: HeaderName) -> Option<&str> {
    headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}").trim())
}

/// A `=?base64?…?=` header value that is not strict base64 of UTF-8 text.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("not valid base64 of UTF-8 text")]
pub struct BadHeaderValue;

/// Decodes `=?base64?…?=` strictly; any other value is literal.
pub fn header_value(raw: &str) -> Result<String, BadHeaderValue> {
    match raw.strip_prefix("=?base64?").and_then(|r| r.strip_suffix("?=")) {
        Some(encoded) => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).map_err(|_| BadHeaderValue)?;
            String::from_utf8(bytes).map_err(|_| BadHeaderValue)
        }
        None => Ok(raw.to_string()),
    }
}

/// Each argument whose schema has `x-mcp-header` and that is present must be mirrored in its
/// `Mcp-Param-<Name>` header, byte for byte after decoding.
pub fn check_param_headers(input_schema: &Value, headers: &HeaderMap, arguments: &Value) -> Result<(), String> {
    let Some(props) = input_schema.get("properties").and_then(Value::as_object) else {
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

/// Whether the client takes an SSE answer. `text/event-stream;q=0` counts too: a client that
/// sends a progress token and disclaims the stream contradicts itself, and the token wins.
pub fn accepts_sse(headers: &HeaderMap) -> bool {
    headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|item| item.trim().to_ascii_lowercase().starts_with("text/event-stream")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_sentinel_is_strict() {
        assert_eq!(header_value("=?base64?SGVsbG8=?="), Ok("Hello".into()));
        assert!(header_value("=?base64?SGVsbG8?=").is_err());
        assert!(header_value("=?base64?SGVs!!!bG8=?=").is_err());
        assert_eq!(header_value("SGVsbG8="), Ok("SGVsbG8=".into()));
        assert_eq!(header_value("=?base64?SGVsbG8="), Ok("=?base64?SGVsbG8=".into()));
    }
}

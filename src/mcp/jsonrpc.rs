//! JSON-RPC 2.0 framing: reading one message (or a 2025-03-26 batch) from raw bytes, and
//! writing results and errors. Bodies are parsed by hand, never by an extractor whose own
//! rejections would bypass the JSON-RPC error mapping.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::codes::*;

/// Deeper JSON than this is refused before it is parsed.
pub const MAX_DEPTH: usize = 64;
/// A 2025-03-26 batch holds at most this many messages; a larger one is refused whole, so
/// one request cannot hold a worker for seconds.
pub const MAX_BATCH: usize = 100;

/// One incoming message.
#[derive(Debug, Clone)]
pub enum Message {
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// The client's answer to a request the server sent it mid-call (elicitation, sampling,
    /// roots): its id, and its `result` or its `error`.
    Response {
        id: Value,
        outcome: Result<Value, Value>,
    },
}

/// Why a body could not become messages: the error to answer with (id null).
#[derive(Debug, Clone, PartialEq)]
pub struct FramingError {
    pub code: i64,
    pub message: String,
}

/// The whole body: one message or a batch (an array).
pub enum Body {
    Single(Result<Message, (Value, FramingError)>),
    Batch(Vec<Result<Message, (Value, FramingError)>>),
}

/// The nesting depth of a JSON text, without parsing it (strings are skipped).
pub fn depth(bytes: &[u8]) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

pub fn parse(bytes: &[u8]) -> Result<Body, FramingError> {
    // No body can nest deeper than it has brackets: counting them is one vectorized pass,
    // and only a body with more than MAX_DEPTH of them is walked.
    let brackets = bytes.iter().filter(|&&b| b == b'[' || b == b'{').count();
    if brackets > MAX_DEPTH && depth(bytes) > MAX_DEPTH {
        return Err(FramingError { code: PARSE_ERROR, message: format!("JSON nested deeper than {MAX_DEPTH} levels") });
    }
    // One object (nearly every request): its members read straight into place, no tree of
    // the whole. Anything else, or anything that does not read so (a duplicate member, a
    // `method` that is not a string, bad JSON), is read the general way below, which answers
    // it exactly as before.
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
        && let Ok(members) = serde_json::from_slice::<Members>(bytes)
    {
        return Ok(Body::Single(message(members)));
    }
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| FramingError { code: PARSE_ERROR, message: format!("the body is not JSON: {e}") })?;
    let single = |value| match value {
        Value::Object(object) => message(Members::of(object)),
        _ => Err((
            Value::Null,
            FramingError { code: INVALID_REQUEST, message: "a JSON-RPC message is an object".into() },
        )),
    };
    match value {
        Value::Array(items) if items.is_empty() => {
            Err(FramingError { code: INVALID_REQUEST, message: "an empty batch is not a request".into() })
        }
        Value::Array(items) if items.len() > MAX_BATCH => Err(FramingError {
            code: INVALID_REQUEST,
            message: format!(
                "a JSON-RPC batch may hold at most {MAX_BATCH} messages (this one has {}); send fewer at a time",
                items.len()
            ),
        }),
        Value::Array(items) => Ok(Body::Batch(items.into_iter().map(single).collect())),
        other => Ok(Body::Single(single(other))),
    }
}

/// The members of a message that JSON-RPC gives meaning to, each `Some` when present (null
/// included); others are ignored.
#[derive(Default, Deserialize)]
struct Members {
    #[serde(default, deserialize_with = "present")]
    jsonrpc: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    method: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    params: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    result: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    error: Option<Value>,
}

/// A member that is there, even as `null` (serde's `Option` would read null as absent).
fn present<'de, D: serde::Deserializer<'de>>(member: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(member).map(Some)
}

impl Members {
    fn of(mut object: serde_json::Map<String, Value>) -> Self {
        let mut take = |name: &str| object.remove(name);
        Self {
            jsonrpc: take("jsonrpc"),
            id: take("id"),
            method: take("method"),
            params: take("params"),
            result: take("result"),
            error: take("error"),
        }
    }
}

fn message(members: Members) -> Result<Message, (Value, FramingError)> {
    let invalid = |id: Value, why: &str| Err((id, FramingError { code: INVALID_REQUEST, message: why.to_string() }));
    let Members { jsonrpc, id, method, params, result, error } = members;
    // MCP ids are strings or integers: never null, never fractional.
    let valid_id = |v: &Value| v.is_string() || v.as_number().is_some_and(|n| n.is_i64() || n.is_u64());
    let id_for_errors = match &id {
        Some(v) if valid_id(v) => v.clone(),
        _ => Value::Null,
    };
    if jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
        return invalid(id_for_errors, "`jsonrpc` must be \"2.0\"");
    }
    if params.as_ref().is_some_and(|p| !p.is_object() && !p.is_array()) {
        return invalid(id_for_errors, "`params` must be an object");
    }
    match (method, id) {
        (Some(Value::String(method)), None) => Ok(Message::Notification { method, params }),
        (Some(Value::String(method)), Some(id)) if valid_id(&id) => Ok(Message::Request { id, method, params }),
        (Some(Value::String(_)), Some(_)) => invalid(Value::Null, "`id` must be a string or an integer, never null"),
        (Some(_), _) => invalid(id_for_errors, "`method` must be a string"),
        (None, Some(id)) if result.is_some() || error.is_some() => {
            let outcome = match result {
                Some(result) => Ok(result),
                None => Err(error.unwrap_or(Value::Null)),
            };
            Ok(Message::Response { id, outcome })
        }
        (None, _) => invalid(id_for_errors, "a request needs a `method`"),
    }
}

/// `{"jsonrpc":"2.0","id":..,"result":<raw>}` around a result that is already JSON text.
pub fn result_raw(id: &Value, result: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#,
        serde_json::to_string(id).unwrap_or_else(|_| "null".into())
    )
}

pub fn result(id: &Value, result: &Value) -> String {
    result_raw(id, &serde_json::to_string(result).expect("JSON values serialize"))
}

pub fn error(id: &Value, code: i64, message: &str, data: Option<Value>) -> String {
    error_with(id, code, message, data.as_ref())
}

/// A JSON-RPC error whose `data` is any serializable value, written straight out (no JSON
/// tree built for it).
pub fn error_with<D: Serialize>(id: &Value, code: i64, message: &str, data: Option<&D>) -> String {
    #[derive(Serialize)]
    struct Envelope<'a, D> {
        jsonrpc: &'static str,
        id: &'a Value,
        error: Body<'a, D>,
    }
    #[derive(Serialize)]
    struct Body<'a, D> {
        code: i64,
        message: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        data: Option<&'a D>,
    }
    serde_json::to_string(&Envelope { jsonrpc: "2.0", id, error: Body { code, message, data } })
        .expect("JSON values serialize")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn depth_skips_strings() {
        assert_eq!(depth(br#"{"a":"[[[[{{{{"}"#), 1);
        assert_eq!(depth(br#"[[["\"]"]]]"#), 3);
    }

    #[test]
    fn messages() {
        let Ok(Body::Single(Ok(Message::Request { id, method, .. }))) =
            parse(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#)
        else {
            panic!()
        };
        assert_eq!((id, method.as_str()), (json!(7), "ping"));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Body::Single(Ok(Message::Notification { .. })))
        ));
        assert!(matches!(parse(br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#), Ok(Body::Single(Err(_)))));
        assert!(
            matches!(parse(br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#), Ok(Body::Single(Err(_)))),
            "ids are integers or strings"
        );
        assert!(matches!(parse(b"{"), Err(FramingError { code: PARSE_ERROR, .. })));
        let deep = "[".repeat(65) + &"]".repeat(65);
        assert!(matches!(parse(deep.as_bytes()), Err(FramingError { code: PARSE_ERROR, .. })));
    }

    #[test]
    fn members_read_in_place_answer_as_a_whole_reading_does() {
        // A duplicate member: the last one counts, as when the object is read whole.
        let Ok(Body::Single(Ok(Message::Request { method, .. }))) =
            parse(br#"{"jsonrpc":"2.0","id":1,"method":"a","method":"ping"}"#)
        else {
            panic!()
        };
        assert_eq!(method, "ping");
        let null_result = parse(br#"{"jsonrpc":"2.0","id":1,"result":null}"#);
        assert!(matches!(null_result, Ok(Body::Single(Ok(Message::Response { outcome: Ok(Value::Null), .. })))));
        let Ok(Body::Single(Err((id, e)))) = parse(br#"{"jsonrpc":"2.0","id":3,"method":5}"#) else { panic!() };
        assert_eq!((id, e.message.as_str()), (json!(3), "`method` must be a string"));
        let Ok(Body::Single(Ok(Message::Request { method, .. }))) =
            parse(br#" {"jsonrpc":"2\u002e0","id":"x","method":"p\u0069ng","extra":[1]}"#)
        else {
            panic!()
        };
        assert_eq!(method, "ping");
        let trailing = parse(br#"{"jsonrpc":"2.0","id":1,"method":"ping"} x"#);
        assert!(matches!(trailing, Err(FramingError { code: PARSE_ERROR, .. })));
        let Ok(Body::Single(Err((id, e)))) = parse(br#""ping""#) else { panic!() };
        assert_eq!((id, e.message.as_str()), (Value::Null, "a JSON-RPC message is an object"));
    }
}

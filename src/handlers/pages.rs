//! Pages that fit a model's context. Every listing tool (`pages:` in tools.yaml) answers at
//! most one page: the rows that fit the answer budget (`--page-bytes`, 64 KiB by default),
//! never a row cut in two, with how many more match and a cursor for the rest. The cursor
//! holds where the next page starts and which query it belongs to, so a cursor passed with
//! other arguments is refused rather than answered with rows of another query.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use toolgate_domain::{Paged, ToolError, ToolOutput, ToolResult};

use crate::services::ToolContext;

/// The arguments that say where a page starts and how long it is, left out of the query a
/// cursor is bound to (the limit may change from page to page).
const POSITION_ARGUMENTS: [&str; 3] = ["cursor", "offset", "limit"];
/// What an answer carries besides its structured content's text and JSON: the JSON-RPC and
/// result framing, the untrusted-data block's words, the server's `_meta`.
const FRAMING_BYTES: usize = 2048;
/// The length of the longest cursor [`Pager::cursor`] makes (a 20-digit start), counted
/// before it is made: `v1.`, the start, `.`, 32 hex digits, in unpadded base64.
const LONGEST_CURSOR: usize = (3 + 20 + 1 + 32usize).div_ceil(3) * 4 - 1;

/// A store limit that cuts no row, for listings paged in memory.
pub const EVERY_ROW: usize = i64::MAX as usize;

/// Where one page starts and how many rows it may hold at most.
#[derive(Debug)]
pub struct Pager {
    start: usize,
    limit: usize,
    query: String,
}

impl Pager {
    /// The page `args` ask for: from their `cursor` (or `offset`), `limit` rows at most
    /// (`default_limit` without one). The cursor must have been made for the same tool with
    /// the same arguments but the position's.
    pub fn of<A: Paged>(args: &A, default_limit: usize) -> Result<Self, ToolError> {
        Self::at(std::any::type_name::<A>(), args, args.cursor(), args.offset(), args.limit(), default_limit)
    }

    fn at(
        tool: &str,
        args: &impl Serialize,
        cursor: Option<&str>,
        offset: Option<i64>,
        limit: Option<i64>,
        default_limit: usize,
    ) -> Result<Self, ToolError> {
        let query = query_key(tool, args);
        let limit = limit.map_or(default_limit, |l| l.max(1) as usize);
        let start = match (cursor, offset) {
            (Some(_), Some(_)) => {
                return Err(ToolError::InvalidArguments(
                    "give `cursor` or `offset`, not both: a cursor already says where its page starts".into(),
                ));
            }
            (Some(cursor), None) => decode(cursor, &query)?,
            (None, offset) => offset.unwrap_or(0).max(0) as usize,
        };
        Ok(Self { start, limit, query })
    }

    /// The first row of the page, counted from the first that matches.
    pub fn start(&self) -> usize {
        self.start
    }

    /// The most rows the page may hold (the budget may cut it shorter).
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The page of `all` rows a listing holds in memory.
    pub fn window<T>(&self, all: Vec<T>) -> (Vec<T>, usize) {
        let total = all.len();
        (all.into_iter().skip(self.start).take(self.limit).collect(), total)
    }

    /// The answer: `envelope` (an object of the tool's other fields) with `field` holding the
    /// first of `rows` (this page's, from `start`) that fit the budget, the cursor for the
    /// rest and how many remain of `total` (every row that matches, on every page).
    pub fn answer(self, ctx: &ToolContext, envelope: Value, field: &str, rows: Vec<Value>, total: usize) -> ToolResult {
        let before = total.saturating_sub(self.start);
        let start = self.start;
        self.finish(ctx, envelope, field, rows, before, |kept| start + kept)
    }

    /// The answer of a listing walked by key, newest first (rows arriving between pages
    /// shift no offset): each row with its key, the next page starting below the last shown.
    /// `matched` counts the rows from this page's start on. The page starts below
    /// [`Pager::below`].
    pub fn answer_keyed(
        self,
        ctx: &ToolContext,
        envelope: Value,
        field: &str,
        rows: Vec<(i64, Value)>,
        matched: usize,
    ) -> ToolResult {
        let keys: Vec<i64> = rows.iter().map(|(key, _)| *key).collect();
        let rows = rows.into_iter().map(|(_, row)| row).collect();
        self.finish(ctx, envelope, field, rows, matched, |kept| keys[kept - 1].max(0) as usize)
    }

    /// The key a keyed page starts below (none: from the newest).
    pub fn below(&self) -> Option<i64> {
        (self.start > 0).then_some(self.start as i64)
    }

    fn finish(
        self,
        ctx: &ToolContext,
        envelope: Value,
        field: &str,
        rows: Vec<Value>,
        from_start: usize,
        next_start: impl FnOnce(usize) -> usize,
    ) -> ToolResult {
        let budget = ctx.services().answer_page_bytes();
        // The fields the tool answers besides the page (a JSON object).
        let mut envelope = match envelope {
            Value::Object(fields) => fields,
            _ => Map::new(),
        };
        envelope.insert(field.to_string(), json!([]));
        envelope.insert("next_cursor".into(), json!("c".repeat(LONGEST_CURSOR)));
        envelope.insert("remaining".into(), json!(from_start));
        let rows = fitting(rows, budget.saturating_sub(FRAMING_BYTES + answer_bytes(&envelope)));
        let remaining = from_start.saturating_sub(rows.len());
        let next = (remaining > 0 && !rows.is_empty()).then(|| self.cursor(next_start(rows.len())));
        envelope.insert(field.to_string(), Value::Array(rows));
        envelope.insert("next_cursor".into(), json!(next));
        envelope.insert("remaining".into(), json!(remaining));
        Ok(ToolOutput::Structured(Value::Object(envelope)))
    }

    fn cursor(&self, start: usize) -> String {
        URL_SAFE_NO_PAD.encode(format!("v1.{start}.{}", self.query))
    }
}

/// The first of `rows` that fit the page budget beside `envelope` (the answer's other
/// fields, each at its largest): for a listing with a cursor of its own (`query_responses`).
pub fn fit(ctx: &ToolContext, envelope: &Value, rows: Vec<Value>) -> Vec<Value> {
    let budget = ctx.services().answer_page_bytes();
    fitting(rows, budget.saturating_sub(FRAMING_BYTES + answer_bytes(envelope)))
}

/// The first of `rows` whose answer stays within `room` bytes; always the first row, so a
/// row larger than the budget still comes (alone) rather than cut or never.
fn fitting(rows: Vec<Value>, room: usize) -> Vec<Value> {
    let mut spent = 0;
    let mut kept = Vec::new();
    for row in rows {
        // The comma before it, in the JSON and in its text copy.
        let cost = answer_bytes(&row) + 2;
        if !kept.is_empty() && spent + cost > room {
            break;
        }
        spent += cost;
        kept.push(row);
    }
    kept
}

/// What `value` adds to an answer: its JSON in `structuredContent`, and the same JSON as the
/// text block's string (each quote and backslash escaped; each non-ASCII character as the
/// `\uXXXX` the untrusted-data block writes, its backslash escaped again): an upper bound.
fn answer_bytes(value: &impl Serialize) -> usize {
    let mut counter = AnswerBytes(0);
    serde_json::to_writer(&mut counter, value).expect("JSON values serialize");
    counter.0
}

struct AnswerBytes(usize);

impl std::io::Write for AnswerBytes {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        for &byte in bytes {
            self.0 += 1 + match byte {
                b'"' | b'\\' => 2,
                0xF0.. => 14,
                0xC0.. => 7,
                0x80.. => 0,
                _ => 1,
            };
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The query a cursor belongs to: the tool and every argument but the position's, hashed.
fn query_key<A: Serialize>(tool: &str, args: &A) -> String {
    let mut arguments = serde_json::to_value(args).unwrap_or(Value::Null);
    if let Some(map) = arguments.as_object_mut() {
        for name in POSITION_ARGUMENTS {
            map.remove(name);
        }
        // An argument left out and one given as null are the same query.
        map.retain(|_, value| !value.is_null());
    }
    let digest = Sha256::new().chain_update(tool).chain_update([0]).chain_update(arguments.to_string()).finalize();
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

fn decode(cursor: &str, query: &str) -> Result<usize, ToolError> {
    let foreign = || {
        ToolError::InvalidArguments(
            "`cursor` is not one this server gave: pass an answer's next_cursor exactly as it came, or leave cursor out to start from the first page".into(),
        )
    };
    let text = URL_SAFE_NO_PAD.decode(cursor).ok().and_then(|b| String::from_utf8(b).ok()).ok_or_else(foreign)?;
    let mut parts = text.split('.');
    let (Some("v1"), Some(start), Some(bound_to), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(foreign());
    };
    let start: usize = start.parse().map_err(|_| foreign())?;
    if bound_to != query {
        return Err(ToolError::InvalidArguments(
            "this cursor pages another query: give it with the same arguments as the call that answered it (only `limit` may change), or leave cursor out to start over".into(),
        ));
    }
    Ok(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_cursor_is_counted() {
        let pager = Pager { start: 0, limit: 1, query: query_key("t", &json!({})) };
        assert_eq!(pager.cursor(usize::MAX).len(), LONGEST_CURSOR);
    }

    #[test]
    fn a_cursor_comes_back_to_its_query_only() {
        let args = json!({"table": "users", "limit": 5});
        let pager = Pager::at("t", &args, None, Some(7), Some(5), 100).unwrap();
        let cursor = pager.cursor(12);
        let again = json!({"table": "users", "limit": 9, "cursor": cursor});
        assert_eq!(Pager::at("t", &again, Some(&cursor), None, Some(9), 100).unwrap().start(), 12);
        let other = json!({"table": "groups", "cursor": cursor});
        let refused = Pager::at("t", &other, Some(&cursor), None, None, 100).unwrap_err();
        assert!(refused.to_string().contains("pages another query"), "{refused}");
        assert!(Pager::at("u", &again, Some(&cursor), None, None, 100).is_err());
        let forged = Pager::at("t", &again, Some("bm90IGEgY3Vyc29y"), None, None, 100).unwrap_err();
        assert!(forged.to_string().contains("not one this server gave"), "{forged}");
        assert!(Pager::at("t", &again, Some(&cursor), Some(1), None, 100).is_err());
    }

    #[test]
    fn rows_are_cut_whole_and_the_first_always_comes() {
        let rows: Vec<Value> = (0..100).map(|i| json!({"n": i, "text": "é\"x"})).collect();
        let one = answer_bytes(&rows[0]) + 2;
        assert_eq!(fitting(rows.clone(), one * 10).len(), 10);
        assert_eq!(fitting(rows.clone(), one * 10 - 1).len(), 9);
        assert_eq!(fitting(rows.clone(), 0).len(), 1);
        // The bound holds: the JSON and its escaped, ASCII-only text copy.
        let text = serde_json::to_string(&crate::untrusted::ascii_json(&rows[0])).unwrap();
        assert!(serde_json::to_string(&rows[0]).unwrap().len() + text.len() <= one);
    }
}

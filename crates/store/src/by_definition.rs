//! Responses across executions: every step that ran one definition, as the reference's
//! `instruction_id` reads them (query_responses, aggregate_responses). Pages are a keyset over
//! (execution start, execution id, step, arrival): a row is on one page only, executions
//! started while paging come at the end, and a row that arrives in an execution the pages
//! have passed is read by that execution's own id.

use serde_json::{Map, Value};
use toolgate_domain::fleet::instruction::TargetStatus;

use crate::{ColumnCondition, Reader};

/// Which rows a grouping reads: one step of one execution, or every step that ran a definition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowsOf<'a> {
    Step { execution_id: &'a str, step: usize },
    Definition(&'a str),
}

/// Where a row stands in the order of a definition's responses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResponsePlace {
    /// When its execution was created (ms).
    pub started_at_ms: i64,
    pub execution_id: String,
    pub step: usize,
    pub arrival: i64,
}

/// A page of the responses to every step that ran `definition`, as `reader` may read them.
#[derive(Clone, Debug, Default)]
pub struct DefinitionQuery {
    pub definition: String,
    pub reader: Option<Reader>,
    pub agent_id: Option<String>,
    pub status: Option<TargetStatus>,
    pub conditions: Vec<ColumnCondition>,
    /// Only rows after this place (None: from the first).
    pub after: Option<ResponsePlace>,
    pub limit: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DefinitionRow {
    pub place: ResponsePlace,
    pub agent_id: String,
    pub values: Map<String, Value>,
}

/// A page of a definition's responses, and whether more matched after it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DefinitionPage {
    pub rows: Vec<DefinitionRow>,
    pub more: bool,
    /// The rows that match after the query's `after`, this page's among them.
    pub matched: usize,
}

/// The LIKE pattern that finds the executions with a step of `definition` in their steps
/// JSON (bound, never spliced); the exact step is then matched on its `definition` key.
pub(crate) fn steps_pattern(definition: &str) -> String {
    format!("%\"definition\":{}%", Value::from(definition))
}

/// The place a page starts after (the very first row when none).
pub(crate) fn start_after(after: &Option<ResponsePlace>) -> ResponsePlace {
    after.clone().unwrap_or(ResponsePlace { started_at_ms: i64::MIN, ..ResponsePlace::default() })
}

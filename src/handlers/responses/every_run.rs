//! Every run of a definition, across executions (the reference's `instruction_id`): a page of
//! its rows, each with its execution and step, and the cursor to the next.

use serde_json::{Value, json};
use toolgate_domain::fleet::instruction::ResultColumn;
use toolgate_domain::groups::Visible;
use toolgate_domain::{ToolError, ToolOutput, ToolResult};
use toolgate_store::{DefinitionQuery, ResponsePlace};

use crate::services::ToolContext;

/// Every-run cursors start so, to tell them from one execution's at a glance.
const PREFIX: &str = "every:";

fn format(definition: &str, place: &ResponsePlace) -> String {
    let ResponsePlace { started_at_ms, execution_id, step, arrival } = place;
    format!("{PREFIX}{definition}/{started_at_ms}/{execution_id}/{step}/{arrival}")
}

/// The place after which the page starts, from a cursor this definition's pages gave.
pub(super) fn parse(cursor: &str, definition: &str) -> Result<ResponsePlace, ToolError> {
    let unreadable = || {
        ToolError::InvalidArguments(format!(
            "`{}` is not a cursor query_responses gave for every run of a definition: pass a next_cursor as it came, \
             or none to start from the first row",
            cursor.chars().take(80).collect::<String>()
        ))
    };
    let parts: Vec<&str> = cursor.strip_prefix(PREFIX).ok_or_else(unreadable)?.split('/').collect();
    let [of, started_at_ms, execution_id, step, arrival] = parts.as_slice() else { return Err(unreadable()) };
    if *of != definition {
        return Err(ToolError::InvalidArguments(format!(
            "this cursor pages every run of `{of}`, not `{definition}`: pass the next_cursor of the same query, or none to start over"
        )));
    }
    Ok(ResponsePlace {
        started_at_ms: started_at_ms.parse().map_err(|_| unreadable())?,
        execution_id: execution_id.to_string(),
        step: step.parse().map_err(|_| unreadable())?,
        arrival: arrival.parse().map_err(|_| unreadable())?,
    })
}

pub(super) async fn page(ctx: &ToolContext, query: DefinitionQuery, columns: &[&ResultColumn]) -> ToolResult {
    let definition = query.definition.clone();
    let page = ctx.services().work().definition_responses(query).await?;
    let fleet = ctx.services().fleet();
    let places: Vec<ResponsePlace> = page.rows.iter().map(|r| r.place.clone()).collect();
    let rows: Vec<Value> = page
        .rows
        .into_iter()
        .map(|r| {
            json!({"agent_id": r.agent_id, "hostname": fleet.hostname(&Visible::All, &r.agent_id), "values": r.values,
                   "execution_id": r.place.execution_id, "step": r.place.step})
        })
        .collect();
    let longest = places.iter().map(|place| format(&definition, place)).max_by_key(String::len);
    let mut answer = json!({
        "execution_id": null,
        "definition": definition,
        "columns": columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        "next_cursor": longest,
        "result_truncated_by_cap": true,
        "remaining": page.matched,
        "retry_after_ms": null,
    });
    let rows = super::fit(ctx, &answer, rows);
    // More rows may come (a run still going, a new one), but the pages already read stay
    // read: the cursor is offered while the limit or the budget cut the page.
    let more = page.more || rows.len() < places.len();
    let next_cursor = more.then(|| rows.len().checked_sub(1).map(|i| format(&definition, &places[i]))).flatten();
    answer["next_cursor"] = json!(next_cursor);
    answer["result_truncated_by_cap"] = json!(more);
    answer["remaining"] = json!(page.matched.saturating_sub(rows.len()));
    answer["rows"] = Value::Array(rows);
    Ok(ToolOutput::Structured(answer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_as_the_place_it_was_made_of_and_only_for_its_definition() {
        let place = ResponsePlace { started_at_ms: 1_700_000, execution_id: "exe-0123".into(), step: 2, arrival: 41 };
        let cursor = format("os_facts", &place);
        assert_eq!(parse(&cursor, "os_facts").unwrap(), place);
        assert!(parse(&cursor, "disk_usage").unwrap_err().to_string().contains("every run of `os_facts`"));
        for bad in ["exe-1/0/4", "every:os_facts/x/exe/0/1", "every:os_facts/1/exe/0"] {
            assert!(parse(bad, "os_facts").unwrap_err().to_string().contains("not a cursor"), "{bad}");
        }
    }
}

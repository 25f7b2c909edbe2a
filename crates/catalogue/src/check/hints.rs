//! Rules 4 and 9: the hints follow from the operation's class, and the description does not
//! contradict them. `readOnlyHint` is never waivable: it is what tiers and clients trust.

use super::Inputs;
use crate::diag::Diagnostic;
use crate::model::{OperationClass, OverridableHint};

/// Words that announce destruction; on a tool with `destructiveHint: false` they contradict it.
const DESTRUCTIVE_WORDS: &[&str] = &[
    "delete",
    "deletes",
    "deleting",
    "remove",
    "removes",
    "removing",
    "destroy",
    "destroys",
    "erase",
    "erases",
    "purge",
    "purges",
    "wipe",
    "wipes",
    "revoke",
    "revokes",
    "overwrite",
    "overwrites",
    "drop",
    "drops",
];
/// Phrases that promise no change; on a tool that is not read-only they contradict it.
const READ_ONLY_PHRASES: &[&str] =
    &["read-only", "read only", "never changes", "does not change", "without changing", "no side effects"];

pub fn check(inputs: &Inputs) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (i, tool) in inputs.tools.model.tools.iter().enumerate() {
        let Some(class) = inputs.class_of(&tool.operation) else {
            continue;
        };
        let a = tool.annotations;
        let waived = |hint| tool.hint_override.as_ref().is_some_and(|o| o.hint == hint);
        let mut needed_override = false;
        let op = format!("`{}:{}`", tool.securable, tool.operation);
        let is_read = class == OperationClass::Read;
        if a.readOnlyHint != is_read {
            let d = if is_read {
                inputs
                    .tool_error(
                        i,
                        "/annotations/readOnlyHint",
                        format!("readOnlyHint is false but {op} is a read-class operation"),
                    )
                    .help("set `readOnlyHint: true`, or map the tool to a write-, delete- or execute-class operation")
            } else {
                inputs.tool_error(i, "/annotations/readOnlyHint", format!("readOnlyHint is true but {op} is a {}-class operation", class.label()))
                    .help("set `readOnlyHint: false`; only read-class operations are read-only, and tiers trust this hint")
            };
            out.push(d);
        }
        if is_read && a.destructiveHint {
            out.push(
                inputs
                    .tool_error(i, "/annotations/destructiveHint", format!("destructiveHint is true on read-only {op}"))
                    .help("a read-only tool changes nothing: set `destructiveHint: false`"),
            );
        }
        if is_read && !a.idempotentHint {
            if waived(OverridableHint::Idempotent) {
                needed_override = true;
            } else {
                out.push(
                    inputs.tool_error(i, "/annotations/idempotentHint", format!("idempotentHint is false on read-only {op}"))
                        .help("set `idempotentHint: true`, or add `hintOverride: {hint: idempotentHint, reason: ...}` saying why repeating it differs"),
                );
            }
        }
        if matches!(class, OperationClass::Delete | OperationClass::Execute) && !a.destructiveHint {
            if waived(OverridableHint::Destructive) {
                needed_override = true;
            } else {
                out.push(
                    inputs.tool_error(i, "/annotations/destructiveHint", format!("destructiveHint is false but {op} is a {}-class operation", class.label()))
                        .help("set `destructiveHint: true`, or add `hintOverride: {hint: destructiveHint, reason: ...}` saying why nothing is lost"),
                );
            }
        }
        if let Some(o) = &tool.hint_override {
            if o.reason.trim().len() < 10 {
                out.push(
                    inputs
                        .tool_error(i, "/hintOverride/reason", "hintOverride needs a written reason")
                        .help("say in a sentence why the usual hint rule does not fit this tool; reviewers read it"),
                );
            } else if !needed_override {
                out.push(
                    inputs
                        .tool_warning(
                            i,
                            "/hintOverride",
                            format!(
                                "hintOverride for {} waives nothing: the hints already follow the rule",
                                o.hint.key()
                            ),
                        )
                        .help("remove the hintOverride"),
                );
            }
        }
        let description = tool.description.to_lowercase();
        let words: Vec<&str> = description.split(|c: char| !c.is_alphanumeric() && c != '-').collect();
        if !a.destructiveHint
            && !a.readOnlyHint
            && let Some(word) = DESTRUCTIVE_WORDS.iter().find(|w| words.contains(w))
        {
            out.push(
                    inputs.tool_warning(i, "/description", format!("the description says \"{word}\" but destructiveHint is false"))
                        .help("if the tool can destroy or overwrite data, set `destructiveHint: true`; otherwise reword the description"),
                );
        }
        if !a.readOnlyHint
            && let Some(phrase) = READ_ONLY_PHRASES.iter().find(|p| description.contains(*p))
        {
            out.push(
                inputs
                    .tool_warning(
                        i,
                        "/description",
                        format!("the description says \"{phrase}\" but the tool is not read-only"),
                    )
                    .help("reword the description, or map the tool to a read-class operation"),
            );
        }
        if a.readOnlyHint
            && let Some(word) = DESTRUCTIVE_WORDS.iter().find(|w| words.contains(w))
        {
            out.push(
                    inputs.tool_warning(i, "/description", format!("the description says \"{word}\" but the tool is read-only"))
                        .help("reword the description (e.g. \"lists\", \"shows\"), or map the tool to a write- or delete-class operation"),
                );
        }
    }
    out
}

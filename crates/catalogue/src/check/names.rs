//! Rule 2: tool names are unique, 1-128 characters of `[A-Za-z0-9_.-]` (SEP-986).

use std::collections::HashMap;

use super::Inputs;
use crate::diag::Diagnostic;

pub const MAX_NAME_LEN: usize = 128;

pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

pub fn check(inputs: &Inputs) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut first_seen: HashMap<&str, usize> = HashMap::new();
    for (i, tool) in inputs.tools.model.tools.iter().enumerate() {
        let name = tool.name.as_str();
        if !valid_name(name) {
            let why = if name.is_empty() {
                "is empty".to_string()
            } else if name.len() > MAX_NAME_LEN {
                format!("is {} characters long (at most {MAX_NAME_LEN})", name.len())
            } else {
                let bad: String =
                    name.chars().filter(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))).collect();
                format!("contains {bad:?}")
            };
            let suggestion: String = name
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-') { c } else { '_' })
                .take(MAX_NAME_LEN)
                .collect();
            let mut d = Diagnostic::error(
                &inputs.tools.file.name,
                inputs.tool_value_pos(i, "/name"),
                format!("tool name {name:?} {why}; names are 1-{MAX_NAME_LEN} characters of A-Z a-z 0-9 _ . -"),
            );
            if !suggestion.is_empty() && suggestion != name {
                d = d.help(format!("rename it, e.g. `{suggestion}`"));
            }
            out.push(d);
        }
        if let Some(&first) = first_seen.get(name) {
            let first_pos = inputs.tool_value_pos(first, "/name");
            out.push(
                inputs
                    .tool_error(i, "/name", format!("duplicate tool name (first defined at line {})", first_pos.line))
                    .help("tool names are unique per server: rename one of the two"),
            );
        } else {
            first_seen.insert(name, i);
        }
    }
    out
}

//! Rule 10: sensitive arguments are declared. A property marked `writeOnly: true` is redacted
//! wherever toolgate echoes arguments (audit, error messages, logs, approval tickets); a
//! property whose name says secret, password, token, private key… must be marked, or marked
//! `writeOnly: false` on purpose.

use serde_json::{Map, Value};

use super::Inputs;
use crate::diag::Diagnostic;

/// Names (or name endings after `_`) that say "this is a secret".
const SECRET_WORDS: &[&str] =
    &["secret", "password", "passwd", "passphrase", "token", "private_key", "privatekey", "api_key", "apikey"];

fn looks_secret(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| lower == *w || lower.ends_with(&format!("_{w}")))
}

/// JSON pointers (into the arguments) of every property marked `writeOnly: true`, and of
/// every secret-looking property left unmarked (`pointer`, then the schema path to report).
pub fn scan(schema: &Map<String, Value>) -> (Vec<String>, Vec<(String, String)>) {
    let (mut marked, mut unmarked) = (Vec::new(), Vec::new());
    walk(schema, "", "", &mut marked, &mut unmarked);
    (marked, unmarked)
}

fn walk(
    schema: &Map<String, Value>,
    pointer: &str,
    schema_path: &str,
    marked: &mut Vec<String>,
    unmarked: &mut Vec<(String, String)>,
) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else { return };
    for (name, prop) in props {
        let Some(prop) = prop.as_object() else { continue };
        let escaped = name.replace('~', "~0").replace('/', "~1");
        let here = format!("{pointer}/{escaped}");
        let here_schema = format!("{schema_path}/properties/{escaped}");
        match prop.get("writeOnly").and_then(Value::as_bool) {
            Some(true) => marked.push(here.clone()),
            None if looks_secret(name) => unmarked.push((here.clone(), here_schema.clone())),
            _ => {}
        }
        walk(prop, &here, &here_schema, marked, unmarked);
    }
}

pub fn check(inputs: &Inputs) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (i, tool) in inputs.tools.model.tools.iter().enumerate() {
        for (pointer, schema_path) in scan(&tool.input_schema).1 {
            out.push(
                inputs
                    .tool_error(
                        i,
                        &format!("/inputSchema{schema_path}"),
                        format!("argument `{pointer}` looks like a secret but is not marked `writeOnly: true`"),
                    )
                    .help(
                        "add `writeOnly: true`: toolgate then keeps it out of the audit log, error messages, \
                         logs and approval tickets; if it is not a secret, write `writeOnly: false` to say so",
                    ),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_say_secret() {
        for name in ["secret", "password", "api_token", "Private_Key", "db_password", "token"] {
            assert!(looks_secret(name), "{name}");
        }
        for name in ["token_id", "tokens", "secretary", "key", "mcp_tier"] {
            assert!(!looks_secret(name), "{name}");
        }
    }
}

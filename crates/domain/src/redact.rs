//! Arguments the catalogue marks `writeOnly: true` are sensitive: wherever toolgate echoes
//! arguments (the audit log, error messages, logs, approval tickets) it echoes them redacted.

use serde_json::Value;

use crate::secrets::hash_secret;

/// What a sensitive value is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Whether the argument at `pointer` is, or is inside, a sensitive one.
pub fn is_sensitive(pointer: &str, sensitive: &[&str]) -> bool {
    sensitive.iter().any(|s| pointer == *s || pointer.strip_prefix(s).is_some_and(|rest| rest.starts_with('/')))
}

/// `arguments` with every sensitive value replaced by [`REDACTED`].
pub fn redacted(arguments: &Value, sensitive: &[&str]) -> Value {
    let mut copy = arguments.clone();
    for pointer in sensitive {
        if let Some(value) = copy.pointer_mut(pointer) {
            *value = Value::String(REDACTED.into());
        }
    }
    copy
}

/// A digest of the sensitive values alone ("" when there are none): what binds an approval
/// ticket to the exact secret of the call it was minted for, without storing the secret.
pub fn sensitive_digest(arguments: &Value, sensitive: &[&str]) -> String {
    let values: Vec<(&str, &Value)> = sensitive.iter().filter_map(|p| arguments.pointer(p).map(|v| (*p, v))).collect();
    if values.is_empty() {
        return String::new();
    }
    let text = serde_json::to_string(&values).expect("JSON values serialize");
    hash_secret(&format!("toolgate-approval-binding-v1\n{text}"))
}

/// At most `max` bytes of `text` (on a character boundary), marked when cut.
/// [`truncated`] for a string the caller owns: returned as it is when short enough (every
/// audit row passes here; most fit).
pub fn truncated_owned(text: String, max: usize) -> String {
    if text.len() <= max { text } else { truncated(&text, max) }
}

pub fn truncated(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn redaction_and_binding() {
        let args = json!({"token_id": "t1", "secret": "s3cr3t", "vault": {"key": "k"}});
        let sensitive = ["/secret", "/vault/key"];
        let shown = redacted(&args, &sensitive);
        assert_eq!(shown, json!({"token_id": "t1", "secret": REDACTED, "vault": {"key": REDACTED}}));
        assert!(is_sensitive("/vault/key", &sensitive) && is_sensitive("/secret/0", &sensitive));
        assert!(!is_sensitive("/secretary", &sensitive) && !is_sensitive("/token_id", &sensitive));
        let digest = sensitive_digest(&args, &sensitive);
        assert!(!digest.contains("s3cr3t") && digest.len() == 64);
        assert_ne!(digest, sensitive_digest(&json!({"secret": "other", "vault": {"key": "k"}}), &sensitive));
        assert_eq!(sensitive_digest(&args, &[]), "");
        assert_eq!(truncated("abcdef", 3), "abc… (6 bytes in all)");
    }
}

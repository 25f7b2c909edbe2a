//! URI templates of RFC 6570's level 1 as resources use them: `{name}` stands for one
//! percent-encoded path segment.

use toolgate_domain::prompts_resources::template_variables;

/// Everything but RFC 3986's unreserved characters, percent-encoded.
pub fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The text `%XX` sequences stand for; None when they do not decode to UTF-8.
pub fn percent_decode(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = value.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The variables' values when `uri` is an instance of `template` (each one non-empty, without
/// `/`, `?` or `#`), in the template's order.
pub fn matches(template: &str, uri: &str) -> Option<Vec<(String, String)>> {
    let names = template_variables(template);
    // The literal pieces between the variables.
    let mut literals = Vec::with_capacity(names.len() + 1);
    let mut rest = template;
    for name in &names {
        let at = rest.find(&format!("{{{name}}}"))?;
        literals.push(&rest[..at]);
        rest = &rest[at + name.len() + 2..];
    }
    literals.push(rest);
    let mut uri = uri.strip_prefix(literals[0])?;
    let mut values = Vec::with_capacity(names.len());
    for (name, next) in names.iter().zip(&literals[1..]) {
        let end = match next.is_empty() {
            true => uri.find(['/', '?', '#']).unwrap_or(uri.len()),
            false => uri.find(next)?,
        };
        let raw = &uri[..end];
        if raw.is_empty() || raw.contains(['/', '?', '#']) {
            return None;
        }
        values.push((name.to_string(), percent_decode(raw)?));
        uri = &uri[end + next.len()..];
    }
    uri.is_empty().then_some(values)
}

/// The template with each variable replaced by its value, percent-encoded.
pub fn expand(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = template.to_string();
    for (name, value) in values {
        out = out.replace(&format!("{{{name}}}"), &percent_encode(value));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_match_and_expand_back() {
        let t = "test://template/{id}/data";
        assert_eq!(matches(t, "test://template/123/data"), Some(vec![("id".into(), "123".into())]));
        assert_eq!(matches(t, "test://template//data"), None);
        assert_eq!(matches(t, "test://template/1/2/data"), None);
        assert_eq!(matches(t, "test://template/123/data/more"), None);
        assert_eq!(matches("agent://{agent_id}", "agent://web%2001"), Some(vec![("agent_id".into(), "web 01".into())]));
        assert_eq!(matches("agent://{agent_id}", "agent://a/b"), None);
        assert_eq!(matches("agent://{agent_id}", "agent://%ff"), None);
        assert_eq!(expand("agent://{agent_id}", &[("agent_id", "a/b c")]), "agent://a%2Fb%20c");
        let round = expand("agent://{agent_id}", &[("agent_id", "é\"\n")]);
        assert_eq!(matches("agent://{agent_id}", &round).unwrap()[0].1, "é\"\n");
    }
}

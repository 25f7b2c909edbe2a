//! Rust names the generated code gives schema properties (syn says what is a keyword).

/// A property name as a Rust field name: snake_case, never a keyword, never empty.
pub fn field_name(name: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else if c.is_ascii_alphanumeric() {
            out.push(c);
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        } else {
            if !out.ends_with('_') {
                out.push('_');
            }
            prev_lower = false;
        }
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'f');
    }
    if syn::parse_str::<syn::Ident>(&out).is_err() {
        out.push('_');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::field_name;
    use toolgate_catalogue::check::handlers::{RUST_KEYWORDS, is_identifier};

    /// The catalogue's identifier check (it links no syn) says what syn says, but for `gen`,
    /// which syn parses for every edition and 2024 (the server's) reserves.
    #[test]
    fn the_catalogue_knows_rust_identifiers_as_syn_does() {
        let samples = ["tags", "set_tag", "_private", "x1", "1x", "", "_", "a-b", "r#type", "über", "Tag"];
        for word in RUST_KEYWORDS.iter().copied().chain(samples) {
            let by_syn = syn::parse_str::<syn::Ident>(word).is_ok() && !word.starts_with("r#") && word.is_ascii();
            let by_syn = by_syn && word != "gen";
            assert_eq!(is_identifier(word), by_syn, "`{word}`");
        }
    }

    #[test]
    fn field_names() {
        assert_eq!(field_name("mimeType"), "mime_type");
        assert_eq!(field_name("type"), "type_");
        assert_eq!(field_name("x-y"), "x_y");
    }
}

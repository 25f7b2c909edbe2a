//! Closest-name suggestions, for every "did you mean" the build, the CLI and the server print.

/// Up to three known names close to `wanted`, best first.
pub fn closest<'a>(wanted: &str, known: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let lower = wanted.to_lowercase();
    let mut scored: Vec<(f64, &str)> = known
        .into_iter()
        .filter_map(|k| {
            let score = if k.to_lowercase() == lower { 2.0 } else { strsim::jaro_winkler(&lower, &k.to_lowercase()) };
            (score >= 0.8).then_some((score, k))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(3).map(|(_, k)| k).collect()
}

/// "did you mean `a`?" / "did you mean one of `a`, `b`?", or the full list when nothing is close.
pub fn did_you_mean<'a>(wanted: &str, known: impl IntoIterator<Item = &'a str> + Clone) -> String {
    let close = closest(wanted, known.clone());
    match close.as_slice() {
        [one] => format!("did you mean `{one}`?"),
        [] => {
            let all: Vec<String> = known.into_iter().map(|k| format!("`{k}`")).collect();
            format!("expected one of {}", all.join(", "))
        }
        many => {
            let quoted: Vec<String> = many.iter().map(|k| format!("`{k}`")).collect();
            format!("did you mean one of {}?", quoted.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        let keys = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"];
        assert_eq!(did_you_mean("readonlyHint", keys), "did you mean `readOnlyHint`?");
        assert_eq!(did_you_mean("zzz", ["a", "b"]), "expected one of `a`, `b`");
        assert_eq!(closest("get_tag", ["get_tags", "set_tag", "zzz"]), vec!["get_tags", "set_tag"]);
    }
}

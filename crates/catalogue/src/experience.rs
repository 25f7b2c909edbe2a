//! `experience.yaml` -> checked signals (docs/experience.md). A signal must watch a metric
//! agents measure, with exactly one threshold the metric can cross, over 1 to 60 samples; its
//! name is unique and its advice is not empty. Every problem is reported at once, at
//! `experience.yaml:line:col`, with the closest name where one was mistyped.

use std::collections::BTreeSet;

use toolgate_domain::fleet::experience::METRICS;
use toolgate_domain::fleet::signals::{SignalType, SignalsFile};

use crate::diag::{self, Diagnostic, did_you_mean};
use crate::load::{self, Parsed};
use crate::source::SourceFile;

/// Where it lives, relative to the workspace root.
pub const SIGNALS_FILE: &str = "experience.yaml";
/// The most consecutive samples a signal may wait for: an hour at one a minute.
pub const MAX_SAMPLES: u32 = 60;

/// Checks every signal; `Ok` is what the build compiles in.
pub fn check(file: &SourceFile) -> Result<SignalsFile, Vec<Diagnostic>> {
    let parsed = load::parse::<SignalsFile>(file)?;
    let mut errors = Vec::new();
    let mut names = BTreeSet::new();
    for (i, signal) in parsed.model.signals.iter().enumerate() {
        check_signal(&parsed, i, signal, &mut names, &mut errors);
    }
    if errors.is_empty() {
        Ok(parsed.model)
    } else {
        diag::sort(&mut errors);
        Err(errors)
    }
}

fn check_signal(
    parsed: &Parsed<SignalsFile>,
    i: usize,
    signal: &SignalType,
    names: &mut BTreeSet<String>,
    out: &mut Vec<Diagnostic>,
) {
    let error = |field: &str, message: String| {
        Diagnostic::error(&parsed.file.name, parsed.map.value(&format!("/signals/{i}/{field}")), message)
    };
    let named = |s: &str| {
        let mut chars = s.chars();
        chars.next().is_some_and(|c| c.is_ascii_lowercase())
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            && s.len() <= 64
    };
    if !named(&signal.name) {
        out.push(error("name", format!("signal name `{}` must match [a-z][a-z0-9_]* (at most 64)", signal.name)));
    }
    if !names.insert(signal.name.clone()) {
        out.push(error("name", format!("signal `{}` is declared twice", signal.name)));
    }
    for (field, text) in [("title", &signal.title), ("check_next", &signal.check_next)] {
        if text.trim().is_empty() {
            out.push(error(
                field,
                format!("signal `{}` has an empty {field}: say it for the person who reads it", signal.name),
            ));
        }
    }
    if !(1..=MAX_SAMPLES).contains(&signal.samples) {
        out.push(error("samples", format!("samples {} is not between 1 and {MAX_SAMPLES}", signal.samples)));
    }
    let Some(metric) = METRICS.iter().find(|m| m.name == signal.metric) else {
        let known = METRICS.iter().map(|m| m.name);
        out.push(
            error(
                "metric",
                format!("signal `{}` watches `{}`, which agents do not measure", signal.name, signal.metric),
            )
            .help(did_you_mean(&signal.metric, known)),
        );
        return;
    };
    let (field, threshold) = match (signal.above, signal.below) {
        (Some(above), None) => ("above", above),
        (None, Some(below)) => ("below", below),
        (Some(_), Some(_)) => return out.push(error("below", "give `above` or `below`, not both".into())),
        (None, None) => return out.push(error("metric", format!("signal `{}` needs `above` or `below`", signal.name))),
    };
    // Every metric is a share, a count or a size: never negative; a share never past 100.
    let (least, most) = if metric.unit == "%" { (0.0, 100.0) } else { (0.0, f64::INFINITY) };
    let impossible = match field {
        "above" => !(least..most).contains(&threshold),
        _ => threshold <= least || threshold > most,
    };
    if impossible {
        let range = if metric.unit == "%" { "0 to 100 %".to_string() } else { format!("0 {} or more", metric.unit) };
        out.push(error(
            field,
            format!("`{}` is {range}: {field} {threshold} can never hold (or always does)", metric.name),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(yaml: &str) -> Result<SignalsFile, Vec<String>> {
        check(&SourceFile::new(SIGNALS_FILE, yaml)).map_err(|d| d.iter().map(Diagnostic::one_line).collect())
    }

    #[test]
    fn the_projects_own_file_passes() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let file = SourceFile::read(&root.join(SIGNALS_FILE), SIGNALS_FILE).unwrap();
        let signals =
            check(&file).unwrap_or_else(|d| panic!("{:?}", d.iter().map(Diagnostic::one_line).collect::<Vec<_>>()));
        assert!(signals.signals.len() >= 5);
    }

    #[test]
    fn every_mistake_is_reported_at_its_line_with_the_closest_name() {
        let yaml = "signals:\n  - name: cpu_high\n    title: High CPU\n    metric: cpu_bsy_pct\n    above: 90\n    samples: 3\n    severity: warning\n    check_next: look\n  - name: cpu_high\n    title: ''\n    metric: disk_free_pct\n    below: 0\n    samples: 0\n    severity: info\n    check_next: look\n  - name: Bad\n    title: t\n    metric: load_1\n    samples: 1\n    severity: info\n    check_next: x\n";
        let errors = checked(yaml).unwrap_err();
        let joined = errors.join("\n");
        assert!(joined.contains("experience.yaml:4:13") && joined.contains("`cpu_busy_pct`"), "{joined}");
        assert!(joined.contains("experience.yaml:9:") && joined.contains("declared twice"), "{joined}");
        assert!(joined.contains("empty title"), "{joined}");
        assert!(joined.contains("below 0 can never hold"), "{joined}");
        assert!(joined.contains("samples 0 is not between 1 and 60"), "{joined}");
        assert!(joined.contains("`Bad` must match") && joined.contains("needs `above` or `below`"), "{joined}");
        let shape = checked("signals:\n  - name: x\n    metric: load_1\n    above: 1\n    samples: 1\n    severity: loud\n    title: t\n    check_next: c\n").unwrap_err();
        assert!(shape.join("\n").contains("experience.yaml:6:"), "{shape:?}");
    }
}

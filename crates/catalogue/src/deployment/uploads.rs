//! The `uploads` part of the deployment settings (docs/uploads.md): how large and how long an
//! upload grant may be, and how long each retention class keeps what was uploaded. The classes
//! are the ones `mint_upload_grant`'s `retention_class` lists in tools.yaml; a deployment sets
//! their durations, never new names.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;

use super::parse_duration;

/// The most any grant may allow, whatever the settings say: uploads are kept in the database.
pub const MAX_UPLOAD_BYTES: u64 = 4 * 1024 * 1024 * 1024;
/// The longest a grant may stay usable.
pub const MAX_GRANT_TTL_SECS: i64 = 7 * 86_400;

/// Durations for the reference system's classes, when the settings name none.
const DEFAULT_RETENTION: &[(&str, &str)] = &[("transient", "1d"), ("standard", "30d"), ("extended", "365d")];

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UploadSettings {
    /// The largest `declared_max_size` a grant may have, in bytes [default: 268435456 (256 MiB); at most 4 GiB].
    #[serde(default)]
    pub max_size_bytes: Option<u64>,
    /// The longest `ttl_secs` a grant may have (`24h`) [default: 24h; at most 7d].
    #[serde(default)]
    pub max_ttl: Option<String>,
    /// A grant's TTL when the call names none (`1h`) [default: 1h].
    #[serde(default)]
    pub default_ttl: Option<String>,
    /// How long each retention class keeps an upload, from when it was stored (`standard:
    /// 30d`) [defaults: transient 1d, standard 30d, extended 365d].
    #[serde(default)]
    pub retention: BTreeMap<String, String>,
}

/// The checked limits, in bytes and seconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadLimits {
    pub max_bytes: u64,
    pub max_ttl_secs: i64,
    pub default_ttl_secs: i64,
    /// Every class the catalogue lists, with its duration.
    pub retention: BTreeMap<String, i64>,
}

/// A problem: the settings' key it is at (under `/uploads`), what, and what to do.
pub type Problem = (String, String, String);

/// The limits `settings` (absent: every default) give `classes` (the catalogue's).
pub fn check(settings: Option<&UploadSettings>, classes: &[&str]) -> Result<UploadLimits, Vec<Problem>> {
    let default = UploadSettings::default();
    let settings = settings.unwrap_or(&default);
    let mut problems: Vec<Problem> = Vec::new();
    let time = |problems: &mut Vec<Problem>, key: String, text: Option<&str>, default: i64, max: i64| {
        let Some(text) = text else { return default };
        match parse_duration(text) {
            Ok(secs) if secs <= max => secs,
            Ok(_) => {
                problems.push((key, format!("`{text}` is longer than the most allowed, {max} s"), String::new()));
                default
            }
            Err(e) => {
                problems.push((key, e, String::new()));
                default
            }
        }
    };
    let max_ttl_secs =
        time(&mut problems, "/uploads/max_ttl".into(), settings.max_ttl.as_deref(), 86_400, MAX_GRANT_TTL_SECS);
    let default_ttl_secs =
        time(&mut problems, "/uploads/default_ttl".into(), settings.default_ttl.as_deref(), 3600, max_ttl_secs);
    let mut retention = BTreeMap::new();
    for (class, text) in &settings.retention {
        let key = format!("/uploads/retention/{class}");
        if !classes.contains(&class.as_str()) {
            let help = toolgate_policy::did_you_mean(class, classes.iter().copied());
            problems.push((key, format!("`{class}` is not a retention class mint_upload_grant offers"), help));
            continue;
        }
        // Ten years: long enough for any legal hold, short enough to add to a timestamp.
        retention.insert(class.clone(), time(&mut problems, key, Some(text), 0, 10 * 365 * 86_400));
    }
    for class in classes {
        if retention.contains_key(*class) {
            continue;
        }
        match DEFAULT_RETENTION.iter().find(|(name, _)| name == class) {
            Some((_, text)) => drop(retention.insert(class.to_string(), parse_duration(text).unwrap_or(86_400))),
            None => problems.push((
                "/uploads/retention".into(),
                format!("the retention class `{class}` has no duration"),
                format!("add `{class}: 30d` (or how long it keeps uploads) under uploads.retention"),
            )),
        }
    }
    let max_bytes = settings.max_size_bytes.unwrap_or(256 * 1024 * 1024);
    if max_bytes == 0 || max_bytes > MAX_UPLOAD_BYTES {
        problems.push((
            "/uploads/max_size_bytes".into(),
            format!("max_size_bytes must be 1 to {MAX_UPLOAD_BYTES}, not {max_bytes}"),
            String::new(),
        ));
    }
    if problems.is_empty() {
        Ok(UploadLimits { max_bytes, max_ttl_secs, default_ttl_secs, retention })
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLASSES: &[&str] = &["standard", "extended", "transient"];

    #[test]
    fn defaults_cover_the_reference_classes_and_settings_replace_them() {
        let limits = check(None, CLASSES).unwrap();
        assert_eq!((limits.max_bytes, limits.max_ttl_secs, limits.default_ttl_secs), (256 << 20, 86_400, 3600));
        assert_eq!(limits.retention["transient"], 86_400);
        assert_eq!(limits.retention["extended"], 365 * 86_400);
        let settings = UploadSettings {
            max_size_bytes: Some(1024),
            max_ttl: Some("2h".into()),
            default_ttl: Some("10m".into()),
            retention: [("standard".to_string(), "7d".to_string())].into(),
        };
        let limits = check(Some(&settings), CLASSES).unwrap();
        assert_eq!((limits.max_bytes, limits.max_ttl_secs, limits.default_ttl_secs), (1024, 7200, 600));
        assert_eq!(limits.retention["standard"], 7 * 86_400);
    }

    #[test]
    fn unknown_classes_bad_durations_and_sizes_are_named() {
        let settings = UploadSettings {
            max_size_bytes: Some(0),
            max_ttl: Some("30d".into()),
            default_ttl: Some("soon".into()),
            retention: [("standrad".to_string(), "7d".to_string())].into(),
        };
        let problems = check(Some(&settings), CLASSES).unwrap_err();
        let keys: Vec<&str> = problems.iter().map(|(k, _, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            ["/uploads/max_ttl", "/uploads/default_ttl", "/uploads/retention/standrad", "/uploads/max_size_bytes"]
        );
        assert!(problems[2].2.contains("standard"), "{problems:?}");
        let problems = check(None, &["standard", "forever"]).unwrap_err();
        assert!(problems[0].1.contains("`forever` has no duration"), "{problems:?}");
    }
}

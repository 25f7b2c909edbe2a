//! How values compare, in scopes and in inventory filters alike: text as text, integers as
//! numbers, versions by the packaging system's rules, and `~` as a glob.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use super::scope::Op;
use super::version::compare_debian;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ValueKind {
    Text,
    Integer,
    /// A package version: compares by the packaging system's rules (Debian's for dpkg).
    Version,
}

impl ValueKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ValueKind::Text => "text",
            ValueKind::Integer => "integer",
            ValueKind::Version => "version",
        }
    }

    /// The operators that make sense for this kind.
    pub fn operators(self) -> &'static [&'static str] {
        match self {
            ValueKind::Text => &["=", "!=", "~", "in", "exists"],
            ValueKind::Integer | ValueKind::Version => &["=", "!=", "~", "<", "<=", ">", ">=", "in", "exists"],
        }
    }
}

/// Whether `actual op wanted` holds for values of `kind`.
pub fn compare(kind: ValueKind, op: Op, actual: &str, wanted: &str) -> bool {
    if op == Op::Glob {
        return glob_matches(wanted.as_bytes(), actual.as_bytes());
    }
    let ordering = match kind {
        ValueKind::Text => actual.cmp(wanted),
        ValueKind::Version => compare_debian(actual, wanted),
        ValueKind::Integer => match (actual.parse::<i128>(), wanted.parse::<i128>()) {
            (Ok(a), Ok(w)) => a.cmp(&w),
            _ => return false,
        },
    };
    match op {
        Op::Eq => ordering == Ordering::Equal,
        Op::Ne => ordering != Ordering::Equal,
        Op::Lt => ordering == Ordering::Less,
        Op::Le => ordering != Ordering::Greater,
        Op::Gt => ordering == Ordering::Greater,
        Op::Ge => ordering != Ordering::Less,
        Op::Glob => unreachable!("handled above"),
    }
}

/// The longest glob a filter or a scope may give, in bytes.
pub const MAX_GLOB_BYTES: usize = 256;
/// The most `*` a glob may hold: matching costs at most (pattern × text) steps per value, and
/// a pattern of many stars is what makes that worst case.
pub const MAX_GLOB_STARS: usize = 8;

/// Whether `pattern` is a glob the server will match: bounded in length and in stars, so the
/// work of one match is bounded too. Err: what to tell the caller.
pub fn check_glob(pattern: &str) -> Result<(), String> {
    if pattern.len() > MAX_GLOB_BYTES {
        return Err(format!("a glob may be at most {MAX_GLOB_BYTES} bytes long (this one is {})", pattern.len()));
    }
    let stars = pattern.bytes().filter(|&b| b == b'*').count();
    if stars > MAX_GLOB_STARS {
        return Err(format!(
            "a glob may hold at most {MAX_GLOB_STARS} `*` (this one has {stars}): match on a shorter pattern, or use ="
        ));
    }
    Ok(())
}

/// `*` matches any run, `?` one character; iterative, so no pattern can blow the stack.
pub fn glob_matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            backtrack = Some((p, t));
            p += 1;
        } else if let Some((bp, bt)) = backtrack {
            p = bp + 1;
            t = bt + 1;
            backtrack = Some((bp, bt + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

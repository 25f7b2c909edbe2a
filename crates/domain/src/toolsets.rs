//! Toolsets (tools.yaml `toolsets`): which tools a client is shown. What a client sees is never
//! what it may do: the gate alone decides a call, whatever list the client chose.
//!
//! A choice is a comma-separated list of toolset names and three words of its own: `all`
//! (every toolset), `default` (the tier's, policy.yaml `tiers[].toolsets`) and `dynamic` (only
//! the core toolsets, which every choice includes: the tools a client finds the others with).

use thiserror::Error;

/// One declared toolset.
#[derive(Debug)]
pub struct ToolsetMeta {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    /// In every choice.
    pub core: bool,
}

/// A set of toolsets, by their index in tools.yaml (the build allows at most 64).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Toolsets(pub u64);

impl Toolsets {
    pub const ALL: Toolsets = Toolsets(u64::MAX);
    pub const NONE: Toolsets = Toolsets(0);

    pub fn of(index: usize) -> Toolsets {
        Toolsets(1u64 << index)
    }

    pub fn contains(self, index: usize) -> bool {
        index < 64 && self.0 & (1u64 << index) != 0
    }

    pub fn union(self, other: Toolsets) -> Toolsets {
        Toolsets(self.0 | other.0)
    }

    /// The core toolsets of `declared`.
    pub fn core(declared: &[ToolsetMeta]) -> Toolsets {
        declared.iter().enumerate().filter(|(_, t)| t.core).fold(Toolsets::NONE, |s, (i, _)| s.union(Toolsets::of(i)))
    }

    /// Whether a tool of toolset `index` (None: the catalogue declares none) is shown.
    pub fn shows(self, index: Option<u8>) -> bool {
        index.is_none_or(|i| self.contains(usize::from(i)))
    }

    /// The names in this set, in tools.yaml's order (`all` when it holds every one).
    pub fn names(self, declared: &[ToolsetMeta]) -> Vec<&'static str> {
        let held: Vec<&'static str> =
            declared.iter().enumerate().filter(|(i, _)| self.contains(*i)).map(|(_, t)| t.name).collect();
        if held.len() == declared.len() { vec!["all"] } else { held }
    }
}

/// Adds toolsets to a session's list and tells its client; returns the list now.
pub type AddToList = dyn Fn(Toolsets) -> Toolsets + Send + Sync;

/// What the client's tool list holds for this call, and, in a session, how a handler adds to
/// it (`enable_toolset`). Outside a session each request's list is its own.
#[derive(Clone)]
pub struct ToolListing {
    shown: Toolsets,
    add: Option<std::sync::Arc<AddToList>>,
}

impl Default for ToolListing {
    /// Everything shown, nothing to add to: what a call made outside MCP sees.
    fn default() -> Self {
        ToolListing { shown: Toolsets::ALL, add: None }
    }
}

impl ToolListing {
    pub fn new(shown: Toolsets, add: Option<std::sync::Arc<AddToList>>) -> Self {
        ToolListing { shown, add }
    }

    pub fn shown(&self) -> Toolsets {
        self.shown
    }

    /// Adds `more` to the session's list (its client is told when that changes it); None
    /// without a session.
    pub fn add(&self, more: Toolsets) -> Option<Toolsets> {
        self.add.as_ref().map(|add| add(more))
    }
}

/// A choice that names something that is not a toolset.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ChoiceError {
    #[error("unknown toolset `{name}`{closest}; the toolsets are: {valid} (and `all`, `default`, `dynamic`)")]
    Unknown { name: String, closest: String, valid: String },
    #[error("no toolset named: the choice is empty; name toolsets ({valid}) or `all`, `default`, `dynamic`")]
    Empty { valid: String },
}

/// Reads a choice: names separated by commas (spaces around them ignored), with the core
/// toolsets always added. `default` stands for `tier_default`.
pub fn parse_choice(text: &str, declared: &[ToolsetMeta], tier_default: Toolsets) -> Result<Toolsets, ChoiceError> {
    let valid = || declared.iter().map(|t| t.name).collect::<Vec<_>>().join(", ");
    let mut chosen = Toolsets::core(declared);
    let mut named = 0;
    for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        named += 1;
        chosen = chosen.union(match word {
            "all" => Toolsets::ALL,
            "default" => tier_default,
            "dynamic" => Toolsets::NONE,
            name => match declared.iter().position(|t| t.name == name) {
                Some(i) => Toolsets::of(i),
                None => {
                    let known = declared.iter().map(|t| t.name).chain(["all", "default", "dynamic"]);
                    let closest = match toolgate_policy::closest(name, known).first() {
                        Some(c) => format!(" (did you mean `{c}`?)"),
                        None => String::new(),
                    };
                    let name = crate::redact::truncated(name, 64);
                    return Err(ChoiceError::Unknown { name, closest, valid: valid() });
                }
            },
        });
    }
    if named == 0 {
        return Err(ChoiceError::Empty { valid: valid() });
    }
    Ok(chosen)
}

/// A credential's stored choice: checked as a request's would be, written back as its names
/// separated by commas (spaces and repeats dropped).
pub fn canonical(text: &str, declared: &[ToolsetMeta]) -> Result<String, ChoiceError> {
    parse_choice(text, declared, Toolsets::NONE)?;
    let mut words: Vec<&str> = Vec::new();
    for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        if !words.contains(&word) {
            words.push(word);
        }
    }
    Ok(words.join(","))
}

/// A stored choice as the toolsets it names now: names the catalogue no longer declares (it
/// was rebuilt since) are left out, and `None` when none is left.
pub fn stored(text: &str, declared: &[ToolsetMeta], tier_default: Toolsets) -> Option<Toolsets> {
    let known: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .filter(|w| ["all", "default", "dynamic"].contains(w) || declared.iter().any(|t| t.name == *w))
        .collect();
    parse_choice(&known.join(","), declared, tier_default).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DECLARED: &[ToolsetMeta] = &[
        ToolsetMeta { name: "discovery", title: "", description: "", core: true },
        ToolsetMeta { name: "fleet", title: "", description: "", core: false },
        ToolsetMeta { name: "executions", title: "", description: "", core: false },
    ];

    #[test]
    fn choices_always_hold_the_core_and_name_what_is_wrong() {
        let default = Toolsets::of(1);
        assert_eq!(parse_choice("dynamic", DECLARED, default), Ok(Toolsets::of(0)));
        assert_eq!(parse_choice(" default ,executions", DECLARED, default), Ok(Toolsets(0b111)));
        assert_eq!(parse_choice("all", DECLARED, default).unwrap().names(DECLARED), ["all"]);
        let err = parse_choice("fleet,executoins", DECLARED, default).unwrap_err().to_string();
        assert!(
            err.contains("`executoins` (did you mean `executions`?)") && err.contains("discovery, fleet, executions"),
            "{err}"
        );
        assert!(matches!(parse_choice(" , ", DECLARED, default), Err(ChoiceError::Empty { .. })));
        assert!(Toolsets::of(1).shows(None) && !Toolsets::of(1).shows(Some(2)));
        assert_eq!(canonical(" fleet , executions,fleet", DECLARED).as_deref(), Ok("fleet,executions"));
        assert_eq!(stored("fleet,gone", DECLARED, default), Some(Toolsets(0b011)));
        assert_eq!(stored("gone", DECLARED, default), None);
    }
}

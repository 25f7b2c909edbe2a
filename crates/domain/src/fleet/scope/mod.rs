//! The scope language: one expression chooses agents, for previews now and executions later.
//!
//! ```text
//! expression := term { "or" term }
//! term       := factor { "and" factor }
//! factor     := "not" factor | "(" expression ")" | condition
//! condition  := field op value | field "in" "(" value { "," value } ")" | field "exists"
//! field      := attribute | "tag:" key
//! op         := "=" | "!=" | "~" | "<" | "<=" | ">" | ">="
//! value      := "quoted" | 'quoted' | bare-word | number
//! ```
//! Keywords are case-insensitive; `~` matches a glob (`*`, `?`); ordering compares numbers as
//! numbers and versions by Debian's rules. docs/scope.md is the user's guide.

mod parse;

use serde::Serialize;

pub use parse::parse;

use super::compare::compare;
pub use super::compare::{ValueKind, glob_matches};

/// The longest expression accepted.
pub const MAX_EXPRESSION_CHARS: usize = 4096;
/// The deepest nesting of parentheses and `not`s accepted.
pub const MAX_DEPTH: usize = 32;

#[derive(Debug, Serialize)]
pub struct Attribute {
    pub name: &'static str,
    pub kind: ValueKind,
    pub description: &'static str,
}

const fn attr(name: &'static str, kind: ValueKind, description: &'static str) -> Attribute {
    Attribute { name, kind, description }
}

/// Every attribute a scope may test, besides `tag:KEY`.
pub const ATTRIBUTES: &[Attribute] = &[
    attr("agent_id", ValueKind::Text, "The agent's id (agt-...)."),
    attr("hostname", ValueKind::Text, "The host's name."),
    attr("status", ValueKind::Text, "online, offline or revoked."),
    attr("os.name", ValueKind::Text, "NAME from /etc/os-release, e.g. \"Debian GNU/Linux\"."),
    attr("os.id", ValueKind::Text, "ID from /etc/os-release, e.g. debian."),
    attr("os.version", ValueKind::Version, "VERSION_ID from /etc/os-release, e.g. 12."),
    attr("kernel", ValueKind::Version, "The kernel release (uname -r)."),
    attr("arch", ValueKind::Text, "The architecture (uname -m), e.g. x86_64."),
    attr("agent.version", ValueKind::Version, "The agent's version."),
    attr("cpu.count", ValueKind::Integer, "Logical CPUs."),
    attr("memory.total", ValueKind::Integer, "Memory in bytes."),
    attr("ip", ValueKind::Text, "Any of the host's IP addresses."),
    attr("group", ValueKind::Text, "The id or name of any management group holding the agent (its ancestors too)."),
];

/// The attributes as a Markdown table (docs/scope.md holds it between markers; a test fails
/// when the two drift).
pub fn attributes_markdown() -> String {
    let mut out = String::from("| attribute | type | what |\n|---|---|---|\n");
    for a in ATTRIBUTES {
        out.push_str(&format!("| `{}` | {} | {} |\n", a.name, a.kind.as_str(), a.description));
    }
    out.push_str("| `tag:KEY` | text | The value of the agent's tag `KEY`. |\n");
    out
}

/// A mistake in an expression, at a 1-based character column.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("column {column}: {message}")]
pub struct ScopeError {
    pub column: usize,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    Attribute(&'static str),
    Tag(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Op {
    #[serde(rename = "=")]
    Eq,
    #[serde(rename = "!=")]
    Ne,
    #[serde(rename = "~")]
    Glob,
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = ">=")]
    Ge,
}

impl Op {
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Glob => "~",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }

    pub fn from_symbol(symbol: &str) -> Option<Op> {
        [Op::Eq, Op::Ne, Op::Glob, Op::Lt, Op::Le, Op::Gt, Op::Ge].into_iter().find(|op| op.symbol() == symbol)
    }

    pub fn is_ordering(self) -> bool {
        matches!(self, Op::Lt | Op::Le | Op::Gt | Op::Ge)
    }
}

/// A parsed expression. `column` fields let later checks (tag keys) point at the source.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "node", rename_all = "snake_case")]
pub enum Scope {
    And {
        all: Vec<Scope>,
    },
    Or {
        any: Vec<Scope>,
    },
    Not {
        scope: Box<Scope>,
    },
    Compare {
        field: Field,
        op: Op,
        value: String,
        #[serde(skip)]
        column: usize,
    },
    In {
        field: Field,
        values: Vec<String>,
        #[serde(skip)]
        column: usize,
    },
    Exists {
        field: Field,
        #[serde(skip)]
        column: usize,
    },
}

/// What a scope is evaluated against: one agent.
pub trait Subject {
    /// The attribute's values (several for `ip`); empty when the agent has not reported it.
    fn attribute(&self, name: &str) -> Vec<String>;
    fn tag(&self, key: &str) -> Option<&str>;
}

impl Scope {
    pub fn matches(&self, subject: &dyn Subject) -> bool {
        match self {
            Scope::And { all } => all.iter().all(|s| s.matches(subject)),
            Scope::Or { any } => any.iter().any(|s| s.matches(subject)),
            Scope::Not { scope } => !scope.matches(subject),
            Scope::Compare { field, op, value, .. } => {
                let kind = field.kind();
                values_of(field, subject).iter().any(|actual| compare(kind, *op, actual, value))
            }
            Scope::In { field, values, .. } => {
                let kind = field.kind();
                values_of(field, subject).iter().any(|actual| values.iter().any(|v| compare(kind, Op::Eq, actual, v)))
            }
            Scope::Exists { field, .. } => !values_of(field, subject).is_empty(),
        }
    }

    /// The tag keys it names, with their columns.
    pub fn tag_keys(&self) -> Vec<(&str, usize)> {
        let mut keys = Vec::new();
        self.visit(&mut |node| {
            if let Scope::Compare { field: Field::Tag(k), column, .. }
            | Scope::In { field: Field::Tag(k), column, .. }
            | Scope::Exists { field: Field::Tag(k), column } = node
            {
                keys.push((k.as_str(), *column));
            }
        });
        keys
    }

    /// The attributes it names (not tags), in order, repeats kept.
    pub fn attribute_names(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        self.visit(&mut |node| {
            if let Scope::Compare { field: Field::Attribute(a), .. }
            | Scope::In { field: Field::Attribute(a), .. }
            | Scope::Exists { field: Field::Attribute(a), .. } = node
            {
                names.push(*a);
            }
        });
        names
    }

    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Scope)) {
        f(self);
        match self {
            Scope::And { all: children } | Scope::Or { any: children } => children.iter().for_each(|c| c.visit(f)),
            Scope::Not { scope } => scope.visit(f),
            _ => {}
        }
    }

    /// A tag key no agent has is almost always a typo: an error naming the closest key in use.
    pub fn check_tag_keys<'k>(&self, known: impl IntoIterator<Item = &'k str> + Clone) -> Result<(), ScopeError> {
        for (key, column) in self.tag_keys() {
            if !known.clone().into_iter().any(|k| k == key) {
                let hint = if known.clone().into_iter().next().is_none() {
                    "no agent has any tag yet (set_tag sets one)".to_string()
                } else {
                    toolgate_policy::did_you_mean(key, known.clone())
                };
                return Err(ScopeError { column, message: format!("no agent has a tag `{key}`: {hint}") });
            }
        }
        Ok(())
    }

    /// The expression written back in a canonical form: keywords lower-case, values quoted,
    /// every group parenthesized.
    pub fn canonical(&self) -> String {
        let join = |children: &[Scope], word: &str| {
            let parts: Vec<String> = children.iter().map(|c| c.canonical()).collect();
            format!("({})", parts.join(word))
        };
        match self {
            Scope::And { all } => join(all, " and "),
            Scope::Or { any } => join(any, " or "),
            Scope::Not { scope } => format!("not {}", scope.canonical()),
            Scope::Compare { field, op, value, .. } => format!("{} {} {}", field.name(), op.symbol(), quote(value)),
            Scope::In { field, values, .. } => {
                let quoted: Vec<String> = values.iter().map(|v| quote(v)).collect();
                format!("{} in ({})", field.name(), quoted.join(", "))
            }
            Scope::Exists { field, .. } => format!("{} exists", field.name()),
        }
    }
}

/// A value in double quotes as the parser reads it back: only `\\` and `\"` are escapes there,
/// so only those two are escaped here and every other character stays itself (JSON's `\n` or
/// `\u001a` would read back as a backslash and letters: the canonical form must parse to
/// itself, since it is what previews and audit rows show and what runs).
fn quote(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

impl Field {
    pub fn name(&self) -> String {
        match self {
            Field::Attribute(name) => (*name).to_string(),
            Field::Tag(key) => format!("tag:{key}"),
        }
    }

    pub fn kind(&self) -> ValueKind {
        match self {
            Field::Attribute(name) => ATTRIBUTES.iter().find(|a| a.name == *name).map_or(ValueKind::Text, |a| a.kind),
            Field::Tag(_) => ValueKind::Text,
        }
    }
}

fn values_of(field: &Field, subject: &dyn Subject) -> Vec<String> {
    match field {
        Field::Attribute(name) => subject.attribute(name),
        Field::Tag(key) => subject.tag(key).map(|v| vec![v.to_string()]).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests;

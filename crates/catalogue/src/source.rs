//! YAML text -> (JSON value, where every node came from).
//!
//! Checks address what they complain about with a JSON pointer (`/tools/3/annotations`);
//! the [`SourceMap`] turns that pointer back into `file:line:col`. Keeping spans out of the
//! model types lets the model be plain serde + schemars and still point at the right line.

use std::collections::HashMap;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use serde_saphyr::Spanned;

use crate::diag::Diagnostic;

/// One input file: the name shown in diagnostics and its text.
#[derive(Clone, Debug)]
pub struct SourceFile {
    pub name: String,
    pub text: String,
}

impl SourceFile {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self { name: name.into(), text: text.into() }
    }

    pub fn read(path: &std::path::Path, name: impl Into<String>) -> std::io::Result<Self> {
        Ok(Self::new(name, std::fs::read_to_string(path)?))
    }
}

/// A 1-based line and column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

#[derive(Clone, Copy, Debug)]
struct Spot {
    key: Option<Pos>,
    value: Pos,
}

/// JSON pointer -> position of the node (and of its mapping key, when it has one).
#[derive(Debug, Default)]
pub struct SourceMap {
    spots: HashMap<String, Spot>,
}

impl SourceMap {
    /// Where the value at `pointer` starts; an unknown pointer falls back to its nearest
    /// known ancestor, so a "missing key" diagnostic points at the mapping that lacks it.
    pub fn value(&self, pointer: &str) -> Pos {
        self.find(pointer).value
    }

    /// Where the key that names `pointer` starts (the value when there is no key).
    pub fn key(&self, pointer: &str) -> Pos {
        let spot = self.find(pointer);
        spot.key.unwrap_or(spot.value)
    }

    fn find(&self, pointer: &str) -> Spot {
        let mut p = pointer;
        loop {
            if let Some(spot) = self.spots.get(p) {
                return *spot;
            }
            match p.rfind('/') {
                Some(i) => p = &p[..i],
                None => {
                    return Spot { key: None, value: Pos { line: 1, col: 1 } };
                }
            }
        }
    }
}

/// Escapes one reference token of a JSON pointer (RFC 6901).
pub fn escape_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Parses YAML (1.2 booleans only: `yes` stays a string) into a JSON value and its source map.
pub fn parse(file: &SourceFile) -> Result<(Value, SourceMap), Diagnostic> {
    // The default budget (250,000 nodes) refuses a catalogue of ~10,000 tools; a catalogue is
    // written by the project's own authors, so the budget scales to that, still bounded.
    let mut budget = serde_saphyr::budget::Budget::default();
    budget.max_nodes = 20_000_000;
    budget.max_events = 50_000_000;
    let options = serde_saphyr::options! { strict_booleans: true, budget: Some(budget) };
    let root: Spanned<Node> = serde_saphyr::from_str_with_options(&file.text, options).map_err(|e| {
        let pos = e
            .location()
            .map(|l| Pos { line: l.line() as u32, col: l.column() as u32 })
            .unwrap_or(Pos { line: 1, col: 1 });
        let first_line = e.to_string();
        let message = first_line.lines().next().unwrap_or("invalid YAML").trim_start_matches("error: ").to_string();
        let message = strip_location_prefix(&message);
        Diagnostic::error(&file.name, pos, format!("invalid YAML: {message}"))
    })?;
    let mut map = SourceMap::default();
    let value = convert(root, String::new(), None, &mut map);
    Ok((value, map))
}

/// serde-saphyr prefixes its messages with "line L column C: "; we print our own position.
fn strip_location_prefix(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("line ")
        && let Some(i) = rest.find(": ")
    {
        let head = &rest[..i];
        if head.contains(" column ") {
            return rest[i + 2..].to_string();
        }
    }
    message.to_string()
}

fn pos_of<T>(s: &Spanned<T>) -> Pos {
    Pos { line: s.referenced.line() as u32, col: s.referenced.column() as u32 }
}

fn convert(node: Spanned<Node>, pointer: String, key: Option<Pos>, map: &mut SourceMap) -> Value {
    map.spots.insert(pointer.clone(), Spot { key, value: pos_of(&node) });
    match node.value {
        Node::Null => Value::Null,
        Node::Bool(b) => Value::Bool(b),
        Node::Int(i) => Value::Number(i.into()),
        Node::UInt(u) => Value::Number(u.into()),
        Node::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
        Node::Str(s) => Value::String(s),
        Node::Seq(items) => Value::Array(
            items.into_iter().enumerate().map(|(i, item)| convert(item, format!("{pointer}/{i}"), None, map)).collect(),
        ),
        Node::Map(entries) => {
            let mut object = Map::new();
            for (k, v) in entries {
                let child = format!("{pointer}/{}", escape_token(&k.value));
                let key_pos = pos_of(&k);
                let value = convert(v, child, Some(key_pos), map);
                object.insert(k.value, value);
            }
            Value::Object(object)
        }
    }
}

/// A YAML node whose children keep their positions.
enum Node {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<Node>>),
    Map(Vec<(Spanned<String>, Spanned<Node>)>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NodeVisitor;
        impl<'de> Visitor<'de> for NodeVisitor {
            type Value = Node;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a YAML value")
            }
            fn visit_unit<E>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_none<E>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
                Ok(Node::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
                Ok(Node::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
                Ok(Node::UInt(v))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
                Ok(Node::Float(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Node, E> {
                Ok(Node::Str(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Node, E> {
                Ok(Node::Str(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Node::Seq(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Node, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = m.next_entry()? {
                    entries.push(entry);
                }
                Ok(Node::Map(entries))
            }
        }
        deserializer.deserialize_any(NodeVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_catalogue_of_ten_thousand_tools_fits_the_budget() {
        // ~30 nodes a tool: 300,000 nodes, past serde-saphyr's default budget of 250,000.
        let tool = "  - {name: t, annotations: {a: 1, b: 2, c: 3, d: 4}, schema: {x: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]}}\n";
        let text = format!("tools:\n{}", tool.repeat(10_000));
        let (value, _) = parse(&SourceFile::new("big.yaml", text)).expect("a big catalogue parses");
        assert_eq!(value["tools"].as_array().map(Vec::len), Some(10_000));
    }

    #[test]
    fn positions_of_keys_and_values() {
        let file = SourceFile::new("t.yaml", "tools:\n  - name: a\n    flag: yes\n");
        let (value, map) = parse(&file).unwrap();
        assert_eq!(value["tools"][0]["flag"], Value::String("yes".into()));
        assert_eq!(map.key("/tools/0/name"), Pos { line: 2, col: 5 });
        assert_eq!(map.value("/tools/0/name"), Pos { line: 2, col: 11 });
        assert_eq!(map.value("/tools/0/missing"), Pos { line: 2, col: 5 });
    }

    #[test]
    fn syntax_error_has_position() {
        let file = SourceFile::new("t.yaml", "tools:\n  - name: [\n");
        let diag = parse(&file).unwrap_err();
        assert_eq!(diag.pos, Pos { line: 2, col: 11 });
        assert!(diag.message.starts_with("invalid YAML: unclosed bracket"));
    }
}

//! `find_tools`' ranking (docs/toolsets.md): what each tool declares in tools.yaml, weighed
//! by where a word appears and how rare it is across the catalogue.
//!
//! - Words: lower case, split at anything but letters and digits, a few English endings
//!   taken off (`services` → `servic`, `restarting` → `restart`), common words dropped, and
//!   the fleet's synonyms mapped to one word (`host`, `machine`, `device`… → `agent`).
//! - A tool's words, by field: its name and title (3 shared by the things they name, at least
//!   1.5 each; their first word, the verb, 1.5), its `keywords` (2.5), its toolset's
//!   name and title (1.5), its description (1), its argument names and its toolset's
//!   description (0.8).
//! - A query word scores the best weight among the fields holding it (a shared prefix of 5
//!   letters or more counts for 0.6 of it), times ln(1 + tools / tools holding it); a tool's
//!   score is the sum over the query's words, plus 30% per query word matched beyond the first.

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use toolgate_domain::catalogue::{Catalogue, ToolMeta};

const STOP_WORDS: &[&str] = &[
    "a", "an", "the", "to", "of", "on", "in", "for", "is", "are", "be", "what", "which", "who", "how", "do", "does",
    "did", "i", "me", "my", "we", "our", "you", "your", "this", "that", "these", "those", "with", "from", "and", "or",
    "by", "it", "its", "can", "could", "would", "should", "there", "any", "some", "at", "as", "into", "about", "need",
    "want", "please", "now", "up", "out", "every", "each", "them", "they", "their", "has", "have", "had", "was",
    "were", "been", "not", "no", "if", "than", "then", "when", "where", "why", "will", "one", "also", "so", "just",
    "let", "make", "sure", "tell", "give",
];

/// Words that mean the same thing to an administrator, mapped to the catalogue's own.
const SYNONYMS: &[(&str, &str)] = &[
    ("host", "agent"),
    ("machine", "agent"),
    ("device", "agent"),
    ("endpoint", "agent"),
    ("computer", "agent"),
    ("laptop", "agent"),
    ("server", "agent"),
    ("node", "agent"),
    ("workstation", "agent"),
    ("fleet", "agent"),
    ("logged", "login"),
    ("logon", "login"),
    ("ubuntu", "os"),
    ("debian", "os"),
    ("rhel", "os"),
    ("centos", "os"),
    ("fedora", "os"),
    ("windows", "os"),
    ("macos", "os"),
    ("program", "software"),
    ("application", "software"),
    ("app", "software"),
    ("package", "software"),
    ("apps", "software"),
    ("command", "instruction"),
    ("script", "instruction"),
    ("result", "response"),
    ("output", "response"),
    ("answer", "response"),
    ("isolat", "quarantin"),
    ("credential", "token"),
    ("permission", "role"),
    ("privilege", "role"),
    ("remov", "delet"),
    ("erase", "delet"),
    ("abort", "cancel"),
    ("down", "offline"),
    ("unreachable", "offline"),
    ("stop", "cancel"),
    ("label", "tag"),
    ("history", "audit"),
    ("approv", "approval"),
    ("certificat", "cert"),
];

/// The words of a text, as the ranking compares them.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 1) // `s` of `agent's`
        .map(|w| w.to_lowercase())
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .map(|w| {
            let stem = stem(&w);
            SYNONYMS.iter().find(|(from, _)| self::stem(from) == stem || *from == w).map_or(stem, |(_, to)| self::stem(to))
        })
        .collect()
}

fn stem(word: &str) -> String {
    let w = word;
    let cut = |suffix: &str, min: usize| w.len() > suffix.len() + min && w.ends_with(suffix);
    let base = if cut("ies", 2) {
        format!("{}y", &w[..w.len() - 3])
    } else if cut("ing", 3) {
        w[..w.len() - 3].to_string()
    } else if cut("ed", 3) || (cut("es", 3) && !w.ends_with("ses")) {
        w[..w.len() - 2].to_string()
    } else if cut("s", 2) && !w.ends_with("ss") {
        w[..w.len() - 1].to_string()
    } else {
        w.to_string()
    };
    // `tagged`/`tag`, `stopping`/`stop`: a doubled last letter left by the cut goes.
    let bytes = base.as_bytes();
    let doubled = bytes.len() >= 4
        && bytes[bytes.len() - 1] == bytes[bytes.len() - 2]
        && !matches!(bytes[bytes.len() - 1], b'l' | b's' | b'e' | b'o')
        && base.len() < w.len();
    let base = if doubled { base[..base.len() - 1].to_string() } else { base };
    // `services`/`service`, `approves`/`approve`: one stem whichever ending was cut.
    base.strip_suffix('e').filter(|b| b.len() >= 4).map_or(base.clone(), str::to_string)
}

/// Each tool's words with their best weight; and how many tools hold each word.
pub struct Index {
    tools: Vec<HashMap<String, f64>>,
    holding: HashMap<String, usize>,
}

impl Index {
    pub fn of(catalogue: &Catalogue) -> Index {
        let tools: Vec<HashMap<String, f64>> = catalogue.tools.iter().map(|t| tool_words(catalogue, t)).collect();
        let mut holding: HashMap<String, usize> = HashMap::new();
        for words in &tools {
            for word in words.keys() {
                *holding.entry(word.clone()).or_default() += 1;
            }
        }
        Index { tools, holding }
    }

    /// Scores of every tool (by catalogue index) for `query`; 0 matches nothing.
    pub fn scores(&self, query: &str) -> Vec<f64> {
        let mut asked = words(query);
        let mut seen = HashSet::new();
        asked.retain(|w| seen.insert(w.clone()));
        let n = self.tools.len() as f64;
        self.tools
            .iter()
            .map(|held| {
                let (mut score, mut matched) = (0.0, 0usize);
                for word in &asked {
                    let (weight, holders) = self.best(held, word);
                    if weight > 0.0 {
                        score += weight * (1.0 + n / holders.max(1) as f64).ln();
                        matched += 1;
                    }
                }
                score * (1.0 + 0.3 * matched.saturating_sub(1) as f64)
            })
            .collect()
    }

    /// The weight `word` has in a tool (exact, else a shared prefix), and how many tools hold it.
    fn best(&self, held: &HashMap<String, f64>, word: &str) -> (f64, usize) {
        if let Some(weight) = held.get(word) {
            return (*weight, self.holding.get(word).copied().unwrap_or(1));
        }
        let prefix = |a: &str, b: &str| a.len() >= 5 && b.starts_with(a);
        held.iter()
            .filter(|(w, _)| prefix(word, w) || prefix(w, word))
            .map(|(w, weight)| (weight * 0.6, self.holding.get(w).copied().unwrap_or(1)))
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .unwrap_or((0.0, 1))
    }
}

fn tool_words(catalogue: &Catalogue, tool: &ToolMeta) -> HashMap<String, f64> {
    let mut held: HashMap<String, f64> = HashMap::new();
    // A name or title starts with its verb (list, get, set…): questions say the same thing
    // with many verbs, and name the thing itself, which weighs more.
    // The fewer things a name speaks of, the more it is about each (`list_agents` is about
    // agents; `get_agent_tags` less so): BM25F's field-length normalisation, on names.
    for text in [tool.name, tool.title] {
        let mut named = words(text).into_iter();
        if let Some(verb) = named.next() {
            let entry = held.entry(verb).or_default();
            *entry = entry.max(1.5);
        }
        let things: Vec<String> = named.collect();
        let weight = 3.0 / (things.len().max(1) as f64).sqrt();
        for word in things {
            let entry = held.entry(word).or_default();
            *entry = entry.max(weight.max(1.5));
        }
    }
    let mut add = |text: &str, weight: f64| {
        for word in words(text) {
            let entry = held.entry(word).or_default();
            *entry = entry.max(weight);
        }
    };
    for keyword in tool.keywords {
        add(keyword, 2.5);
    }
    if let Some(set) = tool.toolset.and_then(|i| catalogue.toolsets.get(usize::from(i))) {
        add(set.name, 1.5);
        add(set.title, 1.5);
        add(set.description, 0.8);
    }
    add(tool.description, 1.0);
    let schema: Value = serde_json::from_str(tool.input_schema).unwrap_or_default();
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for name in properties.keys() {
            add(name, 0.8);
        }
    }
    held
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `TOOLGATE_RANK="a question" cargo test --lib explain_a_ranking -- --nocapture`: the
    /// first ten tools and their scores, for whoever tunes the catalogue's keywords.
    #[test]
    fn explain_a_ranking() {
        let Ok(query) = std::env::var("TOOLGATE_RANK") else { return };
        let catalogue = &crate::registry::CATALOGUE;
        let scores = Index::of(catalogue).scores(&query);
        let mut ranked: Vec<(f64, &str)> = catalogue.tools.iter().map(|t| (scores[t.index], t.name)).collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
        eprintln!("{:?}\n{ranked:.2?}", words(&query), ranked = &ranked[..10]);
    }

    #[test]
    fn words_drop_endings_common_words_and_map_synonyms() {
        assert_eq!(words("Restarting the services on my hosts"), ["restart", "servic", "agent"]);
        assert_eq!(words("list_installed_software"), ["list", "install", "softwar"]);
        assert_eq!(words("Which machines are quarantined?"), ["agent", "quarantin"]);
        assert_eq!(words("tagged stopping installed"), ["tag", "cancel", "install"]);
    }
}

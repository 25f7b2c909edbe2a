//! `find_tools`' ranking (docs/toolsets.md): what each tool declares in tools.yaml, weighed
//! by where a word appears and how rare it is across the catalogue.
//!
//! - Words: as thesaurus.rs makes them (endings taken off, common words dropped, phrases read
//!   as one meaning); a word the thesaurus maps is held as itself and, at 0.8 of its weight,
//!   as the catalogue's word for it.
//! - A tool's words, by field: its name and title (3 shared by the things they name, at least
//!   1.5 each; their first word, the verb, 1.5), its `keywords` (2.5), its toolset's
//!   name and title (1.5), its description (1), its argument names, the values an
//!   enumerated argument takes and its toolset's description (0.8).
//! - A query word scores the best weight among the fields holding it, as itself or as the
//!   catalogue's word (a shared prefix of 5 letters or more counts for 0.6 of it), times
//!   ln(1 + tools / tools holding it); a tool's score is the sum over the query's words, plus
//!   30% per query word matched beyond the first.
//! - What the query asks: a question (or `show…`) keeps half the score of a tool that changes
//!   something (`readOnlyHint: false`); a query opening with a tool's verb (`revoke the
//!   token…`) gives that tool 30% more.

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use toolgate_domain::catalogue::{Catalogue, ToolMeta};

use super::thesaurus::{terms, Term};

/// Each tool's words with their best weight; and how many tools hold each word.
pub struct Index {
    tools: Vec<HashMap<String, f64>>,
    /// Each tool's `readOnlyHint`: a question asks to read.
    read_only: Vec<bool>,
    /// The verbs each tool's name and title start with, and their meanings.
    verbs: Vec<HashSet<String>>,
    holding: HashMap<String, usize>,
}

/// What a tool gains when the query opens with its verb (`revoke the token…`: revoke_api_token).
const VERB_AGREES: f64 = 1.3;

/// What a tool that changes something keeps of its score when the query asks to read.
const READ_ASKED_OF_A_CHANGE: f64 = 0.5;

/// Words that open a query asking to read: a question, or an imperative to show.
const READING_OPENERS: &[&str] = &[
    "which", "what", "whats", "who", "whom", "whose", "where", "when", "how", "is", "are", "was", "were", "does",
    "do", "did", "has", "have", "am", "show", "list", "find", "get", "display", "view", "see", "count", "search",
];

/// Whether `query` asks to read rather than to change: it opens with a question word or a
/// verb of showing, or ends with `?` without asking someone to do something (`can you…?`).
fn asks_to_read(query: &str) -> bool {
    let lower = query.trim().to_lowercase();
    let mut opening = lower.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty());
    let first = opening.next().unwrap_or_default();
    let second = opening.next().unwrap_or_default();
    let asks_someone = matches!(first, "can" | "could" | "would" | "will" | "please") && second == "you";
    !asks_someone && (READING_OPENERS.contains(&first) || lower.ends_with('?'))
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
        let read_only = catalogue.tools.iter().map(|t| t.annotations.read_only).collect();
        let verbs = catalogue.tools.iter().map(tool_verbs).collect();
        Index { tools, read_only, verbs, holding }
    }

    /// Scores of every tool (by catalogue index) for `query`; 0 matches nothing.
    pub fn scores(&self, query: &str) -> Vec<f64> {
        let mut asked = terms(query);
        let mut seen = HashSet::new();
        asked.retain(|t| seen.insert(t.word.clone()));
        let n = self.tools.len() as f64;
        let reading = asks_to_read(query);
        let opening = asked.first();
        self.tools
            .iter()
            .zip(&self.read_only)
            .zip(&self.verbs)
            .map(|((held, read_only), verbs)| {
                let (mut score, mut matched) = (0.0, 0usize);
                for term in &asked {
                    // A word counts once: as itself, or as the catalogue's word for it.
                    let best = forms(term)
                        .map(|form| {
                            let (weight, holders) = self.best(held, form);
                            weight * (1.0 + n / holders.max(1) as f64).ln()
                        })
                        .fold(0.0, f64::max);
                    if best > 0.0 {
                        score += best;
                        matched += 1;
                    }
                }
                let intent = if reading && !read_only { READ_ASKED_OF_A_CHANGE } else { 1.0 };
                let agrees = opening.is_some_and(|verb| forms(verb).any(|form| verbs.contains(form)));
                let verb = if agrees { VERB_AGREES } else { 1.0 };
                score * (1.0 + 0.3 * matched.saturating_sub(1) as f64) * intent * verb
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

/// A term's word, then the catalogue's word for it.
fn forms(term: &Term) -> impl Iterator<Item = &str> {
    std::iter::once(term.word.as_str()).chain(term.meaning.as_deref())
}

/// The first terms of a tool's name and title, with their meanings: what it does.
fn tool_verbs(tool: &ToolMeta) -> HashSet<String> {
    let mut verbs = HashSet::new();
    for text in [tool.name, tool.title] {
        if let Some(verb) = terms(text).first() {
            verbs.extend(forms(verb).map(str::to_string));
        }
    }
    verbs
}

/// What a tool holds of a synonym of its own word, against the word itself.
const SYNONYM_WEIGHT: f64 = 0.8;

fn tool_words(catalogue: &Catalogue, tool: &ToolMeta) -> HashMap<String, f64> {
    let mut held: HashMap<String, f64> = HashMap::new();
    let mut hold = |term: &Term, weight: f64| {
        let entry = held.entry(term.word.clone()).or_default();
        *entry = entry.max(weight);
        if let Some(meaning) = &term.meaning {
            let entry = held.entry(meaning.clone()).or_default();
            *entry = entry.max(weight * SYNONYM_WEIGHT);
        }
    };
    // A name or title starts with its verb (list, get, set…): questions say the same thing
    // with many verbs, and name the thing itself, which weighs more.
    // The fewer things a name speaks of, the more it is about each (`list_agents` is about
    // agents; `get_agent_tags` less so): BM25F's field-length normalisation, on names.
    for text in [tool.name, tool.title] {
        let mut named = terms(text).into_iter();
        if let Some(verb) = named.next() {
            hold(&verb, 1.5);
        }
        let things: Vec<Term> = named.collect();
        let weight = 3.0 / (things.len().max(1) as f64).sqrt();
        for thing in &things {
            hold(thing, weight.max(1.5));
        }
    }
    let mut add = |text: &str, weight: f64| {
        for term in terms(text) {
            hold(&term, weight);
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
        for (name, property) in properties {
            add(name, 0.8);
            // The values an argument takes (`mcp_tier: readonly…`) are what a question names.
            for value in property.get("enum").and_then(Value::as_array).into_iter().flatten() {
                add(value.as_str().unwrap_or_default(), 0.8);
            }
        }
    }
    held
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `TOOLGATE_RANK="a question" cargo test --lib explain_a_ranking -- --nocapture`: the
    /// first ten tools and their scores, for whoever tunes the catalogue's keywords.
    /// `TOOLGATE_RANK_FILE=questions.tsv` (question<TAB>tool lines) instead: the share whose
    /// tool is in the first three, and each miss, to judge a change on questions not seen yet.
    #[test]
    fn explain_a_ranking() {
        let catalogue = &crate::registry::CATALOGUE;
        let index = Index::of(catalogue);
        let ranked = |query: &str| {
            let scores = index.scores(query);
            let mut ranked: Vec<(f64, &str)> = catalogue.tools.iter().map(|t| (scores[t.index], t.name)).collect();
            ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
            ranked
        };
        if let Ok(query) = std::env::var("TOOLGATE_RANK") {
            eprintln!("{:?}\n{ranked:.2?}", terms(&query), ranked = &ranked(&query)[..10]);
        }
        let Ok(file) = std::env::var("TOOLGATE_RANK_FILE") else { return };
        let questions = std::fs::read_to_string(&file).unwrap();
        let (mut asked, mut missed) = (0, 0);
        for line in questions.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
            let (question, expected) = line.split_once('\t').unwrap();
            let top = ranked(question);
            asked += 1;
            if !top[..3].iter().any(|(_, name)| *name == expected) {
                missed += 1;
                eprintln!("{question} -> {expected}, got {:.1?}", &top[..3]);
            }
        }
        eprintln!("{file}: {} of {asked} in the first three", asked - missed);
    }
}

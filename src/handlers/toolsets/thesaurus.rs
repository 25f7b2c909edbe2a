//! The words `find_tools` compares (docs/toolsets.md): lower case, split at anything but
//! letters and digits, a few English endings taken off (`services` → `servic`), common words
//! dropped, and an administrator's everyday words mapped to the catalogue's own: the verbs its
//! names start with (`bounce` → `restart`, `get rid of` → `delete`) and the things they name
//! (`box`, `laptop` → `agent`). Tool texts and queries go through the same mapping, so a
//! synonym only ever joins two words; it never moves a tool.
//!
//! The lists are general English and general fleet vocabulary, not the wording of any test:
//! a word belongs here when an administrator would use it for that meaning in any question.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

const STOP_WORDS: &[&str] = &[
    "a", "an", "the", "to", "of", "on", "in", "for", "is", "are", "be", "what", "which", "how", "do", "does", "did",
    "i", "me", "my", "we", "our", "you", "your", "this", "that", "these", "those", "with", "from", "and", "or",
    "by", "it", "its", "can", "could", "would", "should", "there", "any", "some", "at", "as", "into", "about", "need",
    "want", "please", "now", "up", "out", "every", "each", "them", "they", "their", "has", "have", "had", "was",
    "were", "been", "not", "no", "if", "than", "then", "where", "why", "will", "one", "also", "so", "just", "let",
    "sure", "tell", "us", "all", "okay", "ok", "right", "away", "time", "still", "anymore",
];

/// Phrases whose words mislead one by one (`give me` is not `give`, `get rid of` is not
/// `get`), replaced by what they mean before the text is split into words.
const PHRASES: &[(&str, &str)] = &[
    ("give me", "show"),
    ("show me", "show"),
    ("tell me about", "show details"),
    ("tell me", "show"),
    ("let me see", "show"),
    ("sent back", "response"),
    ("get rid of", "delete"),
    ("set up", "create"),
    ("dry run", "preview"),
    ("look up", "find"),
    ("service account", "automation"),
    ("how many", "count"),
    ("pull the plug on", "cancel"),
    ("no longer", "revoke"),
    ("out of quarantine", "release"),
    ("can i", "permitted"),
    ("may i", "permitted"),
    ("am i allowed", "permitted"),
    ("am i able", "permitted"),
    ("would i be able", "permitted"),
    ("am i permitted", "permitted"),
    ("been up", "uptime"),
    ("logged in", "login"),
    ("signed in", "login"),
    ("log in", "login"),
    ("sign in", "login"),
];

/// Verbs with a particle that may stand after their object (`hand the bot over`), and what
/// they mean; matched when at most four words stand between them.
const PHRASAL_VERBS: &[(&str, &str, &str)] = &[
    ("call", "off", "cancel"),
    ("hand", "over", "transfer"),
    ("take", "over", "transfer"),
    ("take", "away", "revoke"),
    ("take", "off", "delete"),
    ("swap", "out", "rotate"),
    ("roll", "out", "execute"),
    ("turn", "off", "disable"),
    ("switch", "off", "disable"),
    ("shut", "off", "disable"),
    ("turn", "on", "enable"),
    ("switch", "on", "enable"),
    ("wrap", "up", "close"),
    ("let", "back", "release"),
];

/// Words that mean the same to an administrator, each group mapped to the catalogue's word.
const SYNONYMS: &[(&str, &[&str])] = &[
    // The things tools name.
    (
        "agent",
        &[
            "host", "machine", "device", "endpoint", "computer", "laptop", "server", "node", "workstation", "fleet",
            "box", "desktop", "pc", "vm", "instance",
        ],
    ),
    ("os", &["ubuntu", "debian", "rhel", "centos", "fedora", "windows", "macos", "linux", "distro", "distribution"]),
    ("software", &["program", "application", "app", "apps", "package"]),
    ("instruction", &["command", "script"]),
    ("execution", &["job", "rollout", "deployment"]),
    ("response", &["result", "output", "answer", "return"]),
    ("quarantine", &["isolate", "isolation", "contain", "containment"]),
    ("token", &["credential", "apikey"]),
    ("role", &["permission", "privilege", "rights", "entitlement"]),
    ("engine", &["automation", "bot", "robot", "pipeline", "ansible", "terraform", "jenkins", "puppet", "chef"]),
    ("offline", &["down", "unreachable", "silent", "quiet"]),
    ("tag", &["label"]),
    ("audit", &["history", "trail", "log"]),
    ("approval", &["approv", "ticket"]),
    ("cert", &["certificat", "certificate"]),
    // `settings`, since `setting` stems to the verb `set`.
    ("config", &["settings", "configuration", "option", "preference"]),
    ("review", &["recertification", "certification", "campaign", "attestation"]),
    ("login", &["logon"]),
    ("owner", &["own", "owns", "owned"]),
    ("succeed", &["work", "success", "successful"]),
    // A time gone by asks when something happened.
    ("when", &["yesterday", "today", "ago", "recently", "lately", "earlier", "morning", "night", "week", "month", "hour"]),
    // The verbs an administrator says, mapped to those the catalogue's names start with.
    ("create", &["make", "new", "register", "provision", "establish"]),
    (
        "delete",
        &[
            "remove", "remov", "erase", "drop", "purge", "clear", "forget", "destroy", "wipe", "discard", "take",
            "unset", "revoke", "unassign",
        ],
    ),
    ("set", &["put", "mark", "configure", "point"]),
    ("update", &["change", "modify", "edit", "rename", "move", "alter", "adjust"]),
    ("cancel", &["abort", "stop", "halt", "kill", "terminate", "interrupt"]),
    ("restart", &["bounce", "reload", "cycle"]),
    ("rotate", &["roll", "swap", "renew", "replace"]),
    ("revoke", &["withdraw", "invalidate", "retire", "disable"]),
    ("confirm", &["finalise", "finalize"]),
    ("finish", &["complete", "done", "over"]),
    ("execute", &["run", "launch", "trigger", "perform"]),
    ("approve", &["accept", "greenlight"]),
    ("reject", &["deny", "refuse", "decline"]),
    ("assign", &["give", "grant"]),
    ("release", &["unblock", "reconnect", "restore", "unquarantine", "unisolate"]),
    ("evaluate", &["recheck", "rescan", "reevaluate", "assess"]),
    ("aggregate", &["summarize", "summarise", "tally", "total", "average", "count"]),
    ("validate", &["verify", "lint", "parse"]),
    ("preview", &["simulate"]),
    ("get", &["detail", "details", "fetch", "retrieve", "inspect"]),
];

/// A word of a text as the ranking compares it, and the catalogue's word for it when the
/// thesaurus has one: `mark` is itself, and also `set`.
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    pub word: String,
    pub meaning: Option<String>,
}

/// The terms of a text, in order.
pub fn terms(text: &str) -> Vec<Term> {
    let lower = text.to_lowercase();
    // `read-only` is also `readonly`, the way a name (a tier's) writes it.
    let joined = lower
        .split(|c: char| !c.is_alphanumeric() && c != '-')
        .filter(|w| w.contains('-') && w.split('-').all(|part| part.chars().all(char::is_alphabetic)))
        .map(|w| w.replace('-', ""));
    // Phrases are matched on stems, so `takes over` and `take over` are one phrase.
    let stems = |text: &str| text.split(|c: char| !c.is_alphanumeric()).map(stem).collect::<Vec<_>>().join(" ");
    let mut spaced = format!(" {} ", stems(&lower));
    for (phrase, meaning) in PHRASES {
        spaced = spaced.replace(&format!(" {} ", stems(phrase)), &format!(" {} ", stems(meaning)));
    }
    let mut tokens: Vec<String> = spaced.split(' ').map(str::to_string).collect();
    for (verb, particle, meaning) in PHRASAL_VERBS {
        let (verb, particle) = (stem(verb), stem(particle));
        let mut at = 0;
        while let Some(i) = tokens[at..].iter().position(|t| *t == verb).map(|i| i + at) {
            let after = (i + 1..tokens.len().min(i + 6)).find(|j| tokens[*j] == particle);
            if let Some(j) = after {
                tokens[i] = stem(meaning);
                tokens.remove(j);
            }
            at = i + 1;
        }
    }
    let (synonyms, stop_words) = (synonyms(), stop_words());
    tokens
        .into_iter()
        .chain(joined.map(|w| stem(&w)))
        .filter(|w| w.len() > 1) // `s` of `agent's`
        .filter(|w| !stop_words.contains(w))
        .map(|word| {
            let meaning = synonyms.get(&word).filter(|m| **m != word).cloned();
            Term { word, meaning }
        })
        .collect()
}

/// The stop words, stemmed as the words they are compared with.
fn stop_words() -> &'static HashSet<String> {
    static SET: OnceLock<HashSet<String>> = OnceLock::new();
    SET.get_or_init(|| STOP_WORDS.iter().map(|w| stem(w)).collect())
}

/// The words of a text: each term's word, or the catalogue's when it has one.
#[cfg(test)]
pub fn words(text: &str) -> Vec<String> {
    terms(text).into_iter().map(|t| t.meaning.unwrap_or(t.word)).collect()
}

/// Each synonym, stemmed as the words looked up, to its group's stemmed word.
fn synonyms() -> &'static HashMap<String, String> {
    static MAP: OnceLock<HashMap<String, String>> = OnceLock::new();
    MAP.get_or_init(|| {
        let mut map = HashMap::new();
        for (meaning, group) in SYNONYMS {
            for word in *group {
                map.insert(stem(word), stem(meaning));
            }
        }
        map
    })
}

fn stem(word: &str) -> String {
    let w = word;
    let cut = |suffix: &str, min: usize| w.len() > suffix.len() + min && w.ends_with(suffix);
    let base = if cut("ies", 2) {
        format!("{}y", &w[..w.len() - 3])
    } else if cut("ing", 3) {
        w[..w.len() - 3].to_string()
    } else if (cut("ed", 3) && !w.ends_with("eed")) || (cut("es", 3) && !w.ends_with("ses")) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_drop_endings_common_words_and_map_synonyms() {
        assert_eq!(words("Restarting the services on my hosts"), ["restart", "servic", "agent"]);
        assert_eq!(words("list_installed_software"), ["list", "install", "softwar"]);
        assert_eq!(words("Which machines are quarantined?"), ["agent", "quarantin"]);
        assert_eq!(words("tagged stopping installed"), ["tag", "cancel", "install"]);
    }

    #[test]
    fn phrases_mean_what_they_say_and_compounds_are_also_one_word() {
        assert_eq!(words("Get rid of the label"), ["delet", "tag"]);
        assert_eq!(words("give me a read-only token"), ["show", "read", "only", "token", "readonly"]);
        // A phrase is matched on whole words: `reset up` holds no `set up`.
        assert_eq!(words("reset up"), ["reset"]);
        // A particle may stand after the verb's object.
        assert_eq!(words("hand the backup bot over to Sam"), ["transfer", "backup", "engin", "sam"]);
    }
}

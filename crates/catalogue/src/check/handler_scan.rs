//! `toolgate check`'s reader of the handlers' Rust: no parser, a scan of each module file's
//! top-level `fn` items (comments, strings and character literals blanked first, so that a
//! brace inside them does not shift the nesting). It finds what the build's syn reader finds
//! for files that compile; a file that does not is the compiler's to explain.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use super::Inputs;
use super::handlers::{ModuleRead, Outline, RustHandlers, handler_problem};
use crate::diag::Diagnostic;

/// What a reader says once every handler was looked for: warnings, and the files it read.
pub type Finish = fn(&Path, &BTreeSet<(Vec<String>, String)>, &mut Vec<Diagnostic>) -> Vec<PathBuf>;

/// The module files under one directory, each read once by `read` (a scan, or the build's
/// syn), the diagnostic of each tool's handler in them, and `finish` at the end.
pub struct HandlerFiles {
    dir: PathBuf,
    read: fn(&str) -> ModuleRead,
    finish: Finish,
    modules: RefCell<HashMap<Vec<String>, (String, ModuleRead)>>,
}

impl HandlerFiles {
    pub fn new(dir: &Path, read: fn(&str) -> ModuleRead, finish: Finish) -> Self {
        Self { dir: dir.to_path_buf(), read, finish, modules: RefCell::default() }
    }
}

/// The handlers under `src/handlers/` beside tools.yaml, found by a scan (`toolgate check`):
/// errors only; the build warns about handlers no tool uses.
pub fn scanned_handlers(dir: &Path) -> HandlerFiles {
    HandlerFiles::new(dir, |text| ModuleRead::Functions(top_level_functions(text)), |_, _, _| Vec::new())
}

/// `area.rs` or `area/mod.rs`, as the build looks for it: (what messages call it, what it holds).
pub fn read_module(dir: &Path, module: &[String], read: impl Fn(&str) -> ModuleRead) -> (String, ModuleRead) {
    let rel = module.join("/");
    let candidates = [format!("{rel}.rs"), format!("{rel}/mod.rs")];
    for candidate in &candidates {
        if let Ok(text) = std::fs::read_to_string(dir.join(candidate)) {
            return (format!("src/handlers/{candidate}"), read(&text));
        }
    }
    (format!("src/handlers/{}", candidates[0]), ModuleRead::Missing)
}

impl RustHandlers for HandlerFiles {
    fn problem(
        &self,
        inputs: &Inputs,
        i: usize,
        module: &[String],
        function: &str,
        struct_name: &str,
    ) -> Option<Diagnostic> {
        let mut modules = self.modules.borrow_mut();
        let (display, read) =
            modules.entry(module.to_vec()).or_insert_with(|| read_module(&self.dir, module, self.read));
        handler_problem(inputs, i, display, read, function, struct_name)
    }

    fn finish(&self, used: &BTreeSet<(Vec<String>, String)>, diagnostics: &mut Vec<Diagnostic>) -> Vec<PathBuf> {
        (self.finish)(&self.dir, used, diagnostics)
    }
}

/// The source with comments, string and character literals replaced by spaces (lengths kept).
fn blank_literals(text: &str) -> Vec<char> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = chars.clone();
    let mut i = 0;
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in &mut out[from..to.min(chars.len())] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    while i < chars.len() {
        let next = chars.get(i + 1).copied();
        let start = i;
        match chars[i] {
            '/' if next == Some('/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if next == Some('*') => {
                let mut depth = 0;
                while i < chars.len() {
                    if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                        depth += 1;
                        i += 2;
                    } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            'r' if (next == Some('"') || next == Some('#')) && !is_word_char(i.checked_sub(1).map(|p| chars[p])) => {
                let hashes = chars[i + 1..].iter().take_while(|&&c| c == '#').count();
                if chars.get(i + 1 + hashes) != Some(&'"') {
                    i += 1;
                    continue;
                }
                i += 2 + hashes;
                while i < chars.len()
                    && !(chars[i] == '"' && chars[i + 1..].iter().take(hashes).filter(|&&c| c == '#').count() == hashes)
                {
                    i += 1;
                }
                i += 1 + hashes;
            }
            '"' => {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
            }
            // A character literal ('{', '\n', '\u{7b}'), not a lifetime ('a).
            '\'' if next == Some('\\') || chars.get(i + 2) == Some(&'\'') => {
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
            }
            _ => {
                i += 1;
                continue;
            }
        }
        blank(&mut out, start, i);
    }
    out
}

fn is_word_char(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// Every `fn` at the file's top level, with its outline.
pub fn top_level_functions(text: &str) -> Vec<(String, Outline)> {
    let chars = blank_literals(text);
    let mut functions = Vec::new();
    let (mut depth, mut item_start, mut i) = (0usize, 0usize, 0usize);
    while i < chars.len() {
        match chars[i] {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    item_start = i + 1;
                }
            }
            ';' if depth == 0 => item_start = i + 1,
            'f' if depth == 0
                && chars.get(i + 1) == Some(&'n')
                && !is_word_char(i.checked_sub(1).map(|p| chars[p]))
                && !is_word_char(chars.get(i + 2).copied()) =>
            {
                let head: String = chars[item_start..i].iter().collect();
                let words: Vec<&str> = head.split(|c: char| !is_word_char(Some(c))).filter(|w| !w.is_empty()).collect();
                if let Some((name, outline, end)) = signature(&chars, i + 2) {
                    let public = words.first() == Some(&"pub") || head.trim_start().starts_with("pub(");
                    functions.push((name, Outline { public, is_async: words.contains(&"async"), ..outline }));
                    i = end;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    functions
}

/// After `fn`: the name, parameters and return type, and where the body starts.
fn signature(chars: &[char], mut i: usize) -> Option<(String, Outline, usize)> {
    let text = |from: usize, to: usize| chars[from..to].iter().collect::<String>();
    while chars.get(i)?.is_whitespace() {
        i += 1;
    }
    let name_start = i;
    while is_word_char(chars.get(i).copied()) {
        i += 1;
    }
    let name = text(name_start, i);
    while *chars.get(i)? != '(' {
        i += 1; // generics
    }
    let (mut nesting, params_start) = (0i32, i + 1);
    let mut params = Vec::new();
    let mut param_start = params_start;
    loop {
        match *chars.get(i)? {
            '(' | '<' | '[' => nesting += 1,
            ')' | '>' | ']' if chars[i] != '>' || chars[i - 1] != '-' => {
                nesting -= 1;
                if nesting == 0 {
                    params.push(text(param_start, i));
                    break;
                }
            }
            ',' if nesting == 1 => {
                params.push(text(param_start, i));
                param_start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    let params: Vec<String> = params
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .map(|p| match type_colon(&p) {
            Some(colon) => p[colon + 1..].trim().to_string(),
            None => p.trim().to_string(), // `self`, `&self`
        })
        .collect();
    let after = i + 1;
    let mut end = after;
    while end < chars.len() && chars[end] != '{' && chars[end] != ';' {
        end += 1;
    }
    let tail = text(after, end);
    let tail = tail.split(" where ").next().unwrap_or(&tail).trim();
    let returns = tail.strip_prefix("->").map(|t| t.trim().to_string());
    Some((name, Outline { public: false, is_async: false, params, returns }, end))
}

/// The `:` between a parameter's pattern and its type (not one of a path's `::`).
fn type_colon(param: &str) -> Option<usize> {
    let bytes = param.as_bytes();
    (0..bytes.len()).find(|&k| bytes[k] == b':' && bytes.get(k + 1) != Some(&b':') && (k == 0 || bytes[k - 1] != b':'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_top_level_functions_past_braces_in_strings_and_comments() {
        let text = r##"
// fn commented(ctx: &ToolContext) {
pub async fn a(ctx: &ToolContext, args: args::A) -> ToolResult {
    let s = "}}}"; let c = '}'; let r = r#"{"#; /* } */
    format!("{s}")
}
impl X { pub async fn inside(&self) {} }
pub(crate) fn b<T: Into<String>>(x: Vec<(u8, T)>) where T: Clone {}
async fn c(ctx: &mut ToolContext, args: crate::registry::args::C) -> toolgate_domain::ToolResult {}
"##;
        let found = top_level_functions(text);
        let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        let a = &found[0].1;
        assert!(a.public && a.is_async);
        assert_eq!(a.params, ["&ToolContext", "args::A"]);
        assert_eq!(a.returns.as_deref(), Some("ToolResult"));
        assert!(found[1].1.public && !found[1].1.is_async);
        assert_eq!(found[1].1.params, ["Vec<(u8, T)>"]);
        assert!(!found[2].1.public && found[2].1.is_async);
        assert_eq!(found[2].1.params[0], "&mut ToolContext");
    }
}

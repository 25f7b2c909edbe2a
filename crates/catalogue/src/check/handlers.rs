//! Rule 8: every `handler` names a builtin or a Rust function, and (with a [`RustHandlers`]:
//! the build's parses `src/handlers/` with syn, `toolgate check`'s scans its text) that
//! function exists as a `pub async fn` with the signature dispatch calls. The error prints the
//! exact function to add, where, and the closest handler of that module; both readers give it
//! word for word, from [`handler_problem`].

use std::collections::BTreeSet;
use std::path::PathBuf;

use super::Inputs;
use crate::diag::{Diagnostic, did_you_mean};

const BUILTINS: &[&str] = &["echo", "static"];

/// Rust's keywords (strict, reserved and 2024's `gen`): none can name a module or function.
/// `toolgate-codegen`'s tests hold this to syn's own answer, word for word.
pub const RUST_KEYWORDS: &[&str] = &[
    "Self", "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate", "do", "dyn",
    "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "macro",
    "match", "mod", "move", "mut", "override", "priv", "pub", "ref", "return", "self", "static", "struct", "super",
    "trait", "true", "try", "type", "typeof", "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// A plain Rust identifier (ASCII, as handler paths are): not a keyword, not `_`, no `r#`.
pub fn is_identifier(word: &str) -> bool {
    let mut chars = word.chars();
    let starts_well = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    starts_well && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') && word != "_" && !RUST_KEYWORDS.contains(&word)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handler {
    /// `builtin::echo`: the validated arguments come back as structuredContent.
    Echo,
    /// `builtin::static`: the `result` written in the YAML entry.
    Static,
    /// `area::function` in `src/handlers/area.rs`.
    Rust { module: Vec<String>, function: String },
}

impl Handler {
    pub fn parse(text: &str) -> Result<Self, String> {
        let segments: Vec<&str> = text.split("::").collect();
        if segments.first() == Some(&"builtin") && segments.len() == 2 {
            return match segments[1] {
                "echo" => Ok(Handler::Echo),
                "static" => Ok(Handler::Static),
                other => Err(format!(
                    "unknown builtin handler `builtin::{other}`; {}",
                    did_you_mean(other, BUILTINS.iter().copied())
                )),
            };
        }
        if segments.len() < 2 {
            return Err(format!("handler `{text}` must be `area::function` (a function in src/handlers/area.rs)"));
        }
        if let Some(bad) = segments.iter().find(|s| !is_identifier(s)) {
            return Err(format!("handler `{text}`: `{bad}` is not a Rust identifier"));
        }
        let (function, module) = segments.split_last().expect("two or more segments");
        Ok(Handler::Rust { module: module.iter().map(|s| s.to_string()).collect(), function: function.to_string() })
    }
}

/// The signature dispatch calls, as the author should write it.
pub fn expected_signature(function: &str, struct_name: &str) -> String {
    format!("pub async fn {function}(ctx: &ToolContext, args: args::{struct_name}) -> ToolResult")
}

pub struct Report {
    pub diagnostics: Vec<Diagnostic>,
    pub handlers: Vec<Handler>,
    pub files: Vec<PathBuf>,
}

/// Where the Rust handlers are read and their signatures checked: the build's, with syn.
pub trait RustHandlers {
    /// What is wrong with tool `tool`'s handler `module::function` (whose signature must be
    /// `signature`, taking `args::<struct_name>`), if anything: missing, unparsable, misshapen.
    fn problem(
        &self,
        inputs: &Inputs,
        tool: usize,
        module: &[String],
        function: &str,
        struct_name: &str,
    ) -> Option<Diagnostic>;
    /// Warnings for handler-shaped functions no tool names; the files read (for the build's
    /// `rerun-if-changed`).
    fn finish(&self, used: &BTreeSet<(Vec<String>, String)>, diagnostics: &mut Vec<Diagnostic>) -> Vec<PathBuf>;
}

pub fn check(inputs: &Inputs, rust: Option<&dyn RustHandlers>) -> Report {
    let mut diagnostics = Vec::new();
    let struct_names = crate::args::struct_names(&inputs.tools.model.tools);
    let mut handlers = Vec::new();
    let mut used: BTreeSet<(Vec<String>, String)> = BTreeSet::new();

    for (i, tool) in inputs.tools.model.tools.iter().enumerate() {
        let handler = match Handler::parse(&tool.handler) {
            Ok(h) => h,
            Err(why) => {
                diagnostics.push(
                    Diagnostic::error(&inputs.tools.file.name, inputs.tool_value_pos(i, "/handler"), why)
                        .tool(&tool.name),
                );
                handlers.push(Handler::Echo);
                continue;
            }
        };
        match (&handler, &tool.result) {
            (Handler::Static, None) => diagnostics.push(
                inputs
                    .tool_error(i, "/handler", "a `builtin::static` tool needs a `result` (its content blocks)")
                    .help("add `result: {content: [{type: text, text: ...}]}`"),
            ),
            (Handler::Echo | Handler::Rust { .. }, Some(_)) => diagnostics.push(
                inputs
                    .tool_error(i, "/result", "`result` is only read for `builtin::static` tools")
                    .help("remove `result`, or set `handler: builtin::static`"),
            ),
            _ => {}
        }
        if handler != Handler::Static && tool.output_schema.is_none() {
            diagnostics.push(
                inputs
                    .tool_error(i, "", "missing `outputSchema`: results are checked against it")
                    .help("add `outputSchema: {type: object, properties: ...}` describing structuredContent"),
            );
        }
        if let (Handler::Rust { module, function }, Some(rust)) = (&handler, rust) {
            used.insert((module.clone(), function.clone()));
            diagnostics.extend(rust.problem(inputs, i, module, function, &struct_names[i]));
        }
        handlers.push(handler);
    }

    let files = rust.map(|rust| rust.finish(&used, &mut diagnostics)).unwrap_or_default();
    Report { diagnostics, handlers, files }
}

/// A function's outline, as either reader of the handlers' Rust sees it (the build's syn, or
/// `toolgate check`'s scan): enough to say what dispatch cannot call.
#[derive(Clone, Debug, Default)]
pub struct Outline {
    pub public: bool,
    pub is_async: bool,
    /// Each parameter's type as written (a receiver is `self`).
    pub params: Vec<String>,
    /// The return type as written, when there is one.
    pub returns: Option<String>,
}

/// A type's last path segment without generics or a reference: `&crate::ToolContext` →
/// `ToolContext`, `args :: GetThing` → `GetThing`.
fn last_segment(ty: &str) -> &str {
    let ty = ty.trim().trim_start_matches('&').trim_start();
    let ty = ty.strip_prefix("mut ").unwrap_or(ty);
    let ty = ty.split('<').next().unwrap_or(ty);
    ty.rsplit("::").next().unwrap_or(ty).trim()
}

/// What keeps dispatch from calling `function` as `signature`, if anything.
pub fn signature_problem(outline: &Outline, struct_name: &str) -> Option<String> {
    if !outline.public {
        return Some("is not `pub`".into());
    }
    if !outline.is_async {
        return Some("is not `async`".into());
    }
    if outline.params.len() != 2 || outline.params.iter().any(|p| p.trim().ends_with("self")) {
        return Some(format!(
            "takes {} parameters; dispatch passes two (the context and the arguments)",
            outline.params.len()
        ));
    }
    let ctx = outline.params[0].trim();
    if !(ctx.starts_with('&') && !ctx[1..].trim_start().starts_with("mut ") && last_segment(ctx) == "ToolContext") {
        return Some("must take `&ToolContext` first".into());
    }
    if outline.params[1].trim().starts_with('&') || last_segment(&outline.params[1]) != struct_name {
        return Some(format!("must take `args::{struct_name}` second"));
    }
    if outline.returns.as_deref().map(last_segment) != Some("ToolResult") {
        return Some("must return `ToolResult`".into());
    }
    None
}

/// Whether an outline takes a `&ToolContext` first: handler-shaped when public and async.
pub fn takes_context(outline: &Outline) -> bool {
    outline.params.first().is_some_and(|p| p.trim().starts_with('&') && last_segment(p) == "ToolContext")
}

/// One module file of `src/handlers/` as a reader found it.
pub enum ModuleRead {
    /// Neither `area.rs` nor `area/mod.rs` exists.
    Missing,
    /// It exists but could not be read as Rust.
    Unreadable,
    /// Its top-level functions, by name.
    Functions(Vec<(String, Outline)>),
}

/// The diagnostic for tool `i`'s handler `function` in the module file shown as `display`,
/// the same whichever reader found it.
pub fn handler_problem(
    inputs: &Inputs,
    i: usize,
    display: &str,
    read: &ModuleRead,
    function: &str,
    struct_name: &str,
) -> Option<Diagnostic> {
    let handler = &inputs.tool(i).handler;
    let signature = expected_signature(function, struct_name);
    let error = |message: String| inputs.tool_error(i, "/handler", message);
    match read {
        ModuleRead::Missing => Some(
            error(format!("handler `{handler}` not found: {display} does not exist"))
                .help(format!("create {display} with\n    {signature} {{ ... }}")),
        ),
        ModuleRead::Unreadable => Some(
            error(format!("handler `{handler}`: {display} does not parse as Rust"))
                .help("fix the syntax error (cargo check shows it)"),
        ),
        ModuleRead::Functions(functions) => match functions.iter().find(|(name, _)| name == function) {
            None => {
                let handlers = functions
                    .iter()
                    .filter(|(_, o)| o.public && o.is_async && takes_context(o))
                    .map(|(name, _)| name.as_str());
                let closest = match crate::diag::closest(function, handlers).first() {
                    Some(name) => format!("; did you mean `{name}`?"),
                    None => String::new(),
                };
                Some(
                    error(format!("handler `{handler}` not found in {display}{closest}"))
                        .help(format!("add to {display}:\n    {signature} {{ ... }}")),
                )
            }
            Some((_, outline)) => signature_problem(outline, struct_name).map(|problem| {
                error(format!("handler `{handler}` in {display} {problem}"))
                    .help(format!("write it as\n    {signature}"))
            }),
        },
    }
}

//! Rule 8: every `handler` is a `pub async fn` with the signature dispatch calls, found by
//! parsing `src/handlers/` with syn. The error prints the exact function to add, and where.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use super::Inputs;
use crate::diag::{Diagnostic, did_you_mean};
use crate::source::Pos;

const BUILTINS: &[&str] = &["echo", "static"];

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
        if let Some(bad) = segments.iter().find(|s| syn::parse_str::<syn::Ident>(s).is_err() || s.starts_with("r#")) {
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

struct ModuleFile {
    path: PathBuf,
    display: String,
    ast: Option<syn::File>,
}

fn module_file(dir: &Path, module: &[String]) -> ModuleFile {
    let rel = module.join("/");
    let candidates = [format!("{rel}.rs"), format!("{rel}/mod.rs")];
    for candidate in &candidates {
        let path = dir.join(candidate);
        if let Ok(text) = std::fs::read_to_string(&path) {
            return ModuleFile { path, display: format!("src/handlers/{candidate}"), ast: syn::parse_file(&text).ok() };
        }
    }
    ModuleFile { path: dir.join(&candidates[0]), display: format!("src/handlers/{}", candidates[0]), ast: None }
}

pub fn check(inputs: &Inputs, dir: Option<&Path>) -> Report {
    let mut diagnostics = Vec::new();
    let struct_names = crate::args::struct_names(&inputs.tools.model.tools);
    let mut handlers = Vec::new();
    let mut modules: HashMap<Vec<String>, ModuleFile> = HashMap::new();
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
        if let (Handler::Rust { module, function }, Some(dir)) = (&handler, dir) {
            used.insert((module.clone(), function.clone()));
            let file = modules.entry(module.clone()).or_insert_with(|| module_file(dir, module));
            let signature = expected_signature(function, &struct_names[i]);
            match &file.ast {
                None if !file.path.exists() => diagnostics.push(
                    inputs
                        .tool_error(
                            i,
                            "/handler",
                            format!("handler `{}` not found: {} does not exist", tool.handler, file.display),
                        )
                        .help(format!("create {} with\n    {signature} {{ ... }}", file.display)),
                ),
                None => diagnostics.push(
                    inputs
                        .tool_error(
                            i,
                            "/handler",
                            format!("handler `{}`: {} does not parse as Rust", tool.handler, file.display),
                        )
                        .help("fix the syntax error (cargo check shows it)"),
                ),
                Some(ast) => {
                    let found = ast.items.iter().find_map(|item| match item {
                        syn::Item::Fn(f) if f.sig.ident == function.as_str() => Some(f),
                        _ => None,
                    });
                    match found {
                        None => diagnostics.push(
                            inputs
                                .tool_error(
                                    i,
                                    "/handler",
                                    format!("handler `{}` not found in {}", tool.handler, file.display),
                                )
                                .help(format!("add to {}:\n    {signature} {{ ... }}", file.display)),
                        ),
                        Some(f) => {
                            if let Some(problem) = signature_problem(f, &struct_names[i]) {
                                diagnostics.push(
                                    inputs
                                        .tool_error(
                                            i,
                                            "/handler",
                                            format!("handler `{}` in {} {problem}", tool.handler, file.display),
                                        )
                                        .help(format!("write it as\n    {signature}")),
                                );
                            }
                        }
                    }
                }
            }
        }
        handlers.push(handler);
    }

    let mut files = Vec::new();
    if let Some(dir) = dir {
        files.extend(unused_handlers(dir, &used, &mut diagnostics));
        files.push(dir.to_path_buf());
    }
    Report { diagnostics, handlers, files }
}

fn last_segment(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

fn signature_problem(f: &syn::ItemFn, struct_name: &str) -> Option<String> {
    if !matches!(f.vis, syn::Visibility::Public(_)) {
        return Some("is not `pub`".into());
    }
    if f.sig.asyncness.is_none() {
        return Some("is not `async`".into());
    }
    let params: Vec<&syn::Type> = f
        .sig
        .inputs
        .iter()
        .filter_map(|a| match a {
            syn::FnArg::Typed(t) => Some(&*t.ty),
            syn::FnArg::Receiver(_) => None,
        })
        .collect();
    if params.len() != 2 || f.sig.inputs.len() != 2 {
        return Some(format!(
            "takes {} parameters; dispatch passes two (the context and the arguments)",
            f.sig.inputs.len()
        ));
    }
    let ctx_ok = matches!(params[0], syn::Type::Reference(r) if r.mutability.is_none() && last_segment(&r.elem).as_deref() == Some("ToolContext"));
    if !ctx_ok {
        return Some("must take `&ToolContext` first".into());
    }
    if last_segment(params[1]).as_deref() != Some(struct_name) {
        return Some(format!("must take `args::{struct_name}` second"));
    }
    let returns_ok =
        matches!(&f.sig.output, syn::ReturnType::Type(_, ty) if last_segment(ty).as_deref() == Some("ToolResult"));
    if !returns_ok {
        return Some("must return `ToolResult`".into());
    }
    None
}

/// Handler-shaped functions (`pub async fn` taking `&ToolContext`) that no tool names.
fn unused_handlers(dir: &Path, used: &BTreeSet<(Vec<String>, String)>, out: &mut Vec<Diagnostic>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), Vec::<String>::new())];
    while let Some((folder, prefix)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        entries.sort();
        for path in entries {
            let Some(stem) = path.file_stem().and_then(|s| s.to_str()).map(str::to_string) else {
                continue;
            };
            if path.is_dir() {
                let mut p = prefix.clone();
                p.push(stem);
                stack.push((path, p));
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            files.push(path.clone());
            let module = if stem == "mod" {
                prefix.clone()
            } else {
                let mut m = prefix.clone();
                m.push(stem);
                m
            };
            // A module no tool names is not compiled at all (see emit::dispatch::modules).
            if module.is_empty() || module == ["builtin"] || !used.iter().any(|(m, _)| m[0] == module[0]) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let Ok(ast) = syn::parse_file(&text) else {
                continue;
            };
            for item in &ast.items {
                let syn::Item::Fn(f) = item else { continue };
                let takes_ctx = matches!(f.sig.inputs.first(), Some(syn::FnArg::Typed(t)) if matches!(&*t.ty, syn::Type::Reference(r) if last_segment(&r.elem).as_deref() == Some("ToolContext")));
                if !(matches!(f.vis, syn::Visibility::Public(_)) && f.sig.asyncness.is_some() && takes_ctx) {
                    continue;
                }
                let name = f.sig.ident.to_string();
                if !used.contains(&(module.clone(), name.clone())) {
                    let start = f.sig.ident.span().start();
                    let rel = path.strip_prefix(dir).unwrap_or(&path).to_string_lossy().replace('\\', "/");
                    out.push(
                        Diagnostic::warning(
                            &format!("src/handlers/{rel}"),
                            Pos { line: start.line as u32, col: start.column as u32 + 1 },
                            format!("handler `{}::{name}` is not used by any tool", module.join("::")),
                        )
                        .help("add a tool with this handler to tools.yaml, or remove the function"),
                    );
                }
            }
        }
    }
    files
}

//! The handler rule's half that reads Rust: `src/handlers/` parsed with syn, each tool's
//! function found and its signature compared with the one dispatch calls; handler-shaped
//! functions no tool names are warned about.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use toolgate_catalogue::check::Inputs;
use toolgate_catalogue::check::handlers::{RustHandlers, expected_signature};
use toolgate_catalogue::diag::Diagnostic;
use toolgate_catalogue::source::Pos;

/// The handlers under one directory, each module file parsed once.
pub struct SynHandlers {
    dir: PathBuf,
    modules: RefCell<HashMap<Vec<String>, ModuleFile>>,
}

impl SynHandlers {
    pub fn new(dir: &Path) -> Self {
        Self { dir: dir.to_path_buf(), modules: RefCell::default() }
    }
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

impl RustHandlers for SynHandlers {
    fn problem(
        &self,
        inputs: &Inputs,
        i: usize,
        module: &[String],
        function: &str,
        struct_name: &str,
    ) -> Option<Diagnostic> {
        let tool = &inputs.tools.model.tools[i];
        let mut modules = self.modules.borrow_mut();
        let file = modules.entry(module.to_vec()).or_insert_with(|| module_file(&self.dir, module));
        let signature = expected_signature(function, struct_name);
        match &file.ast {
            None if !file.path.exists() => Some(
                inputs
                    .tool_error(
                        i,
                        "/handler",
                        format!("handler `{}` not found: {} does not exist", tool.handler, file.display),
                    )
                    .help(format!("create {} with\n    {signature} {{ ... }}", file.display)),
            ),
            None => Some(
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
                    syn::Item::Fn(f) if f.sig.ident == function => Some(f),
                    _ => None,
                });
                match found {
                    None => Some(
                        inputs
                            .tool_error(
                                i,
                                "/handler",
                                format!("handler `{}` not found in {}", tool.handler, file.display),
                            )
                            .help(format!("add to {}:\n    {signature} {{ ... }}", file.display)),
                    ),
                    Some(f) => signature_problem(f, struct_name).map(|problem| {
                        inputs
                            .tool_error(
                                i,
                                "/handler",
                                format!("handler `{}` in {} {problem}", tool.handler, file.display),
                            )
                            .help(format!("write it as\n    {signature}"))
                    }),
                }
            }
        }
    }

    fn finish(&self, used: &BTreeSet<(Vec<String>, String)>, diagnostics: &mut Vec<Diagnostic>) -> Vec<PathBuf> {
        let mut files = unused_handlers(&self.dir, used, diagnostics);
        files.push(self.dir.clone());
        files
    }
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

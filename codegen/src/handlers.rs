//! The handler rule's half that reads Rust: `src/handlers/` parsed with syn, each tool's
//! function found and its signature compared with the one dispatch calls; handler-shaped
//! functions no tool names are warned about.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use quote::ToTokens;
use toolgate_catalogue::check::handler_scan::HandlerFiles;
use toolgate_catalogue::check::handlers::{ModuleRead, Outline, takes_context};
use toolgate_catalogue::diag::Diagnostic;
use toolgate_catalogue::source::Pos;

/// The handlers under one directory, each module file parsed once with syn; the handler-shaped
/// functions no tool names are warned about at the end.
pub fn syn_handlers(dir: &Path) -> HandlerFiles {
    HandlerFiles::new(dir, parsed, |dir, used, diagnostics| {
        let mut files = unused_handlers(dir, used, diagnostics);
        files.push(dir.to_path_buf());
        files
    })
}

/// A syn function's outline, for the rule the scan of `toolgate check` shares.
fn outline(f: &syn::ItemFn) -> Outline {
    let params = f
        .sig
        .inputs
        .iter()
        .map(|a| match a {
            syn::FnArg::Typed(t) => t.ty.to_token_stream().to_string(),
            syn::FnArg::Receiver(_) => "self".into(),
        })
        .collect();
    let returns = match &f.sig.output {
        syn::ReturnType::Type(_, ty) => Some(ty.to_token_stream().to_string()),
        syn::ReturnType::Default => None,
    };
    Outline {
        public: matches!(f.vis, syn::Visibility::Public(_)),
        is_async: f.sig.asyncness.is_some(),
        params,
        returns,
    }
}

/// A module file's top-level functions, parsed with syn.
fn parsed(text: &str) -> ModuleRead {
    match syn::parse_file(text) {
        Ok(ast) => ModuleRead::Functions(
            ast.items
                .iter()
                .filter_map(|item| match item {
                    syn::Item::Fn(f) => Some((f.sig.ident.to_string(), outline(f))),
                    _ => None,
                })
                .collect(),
        ),
        Err(_) => ModuleRead::Unreadable,
    }
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
                let shape = outline(f);
                if !(shape.public && shape.is_async && takes_context(&shape)) {
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

//! The server crate's modules point one way: no cycle between the top-level modules of
//! `src/` (the generated code the registry includes counted with it), and none between the
//! files of `src/mcp/` or of `src/http/`, so a request reads top-down. Edges come from the paths the code
//! names: `crate::a::…` anywhere, and `super::x` (or `use super::{x, …}`) between siblings.
//! An item a parent module re-exports is not followed through the parent.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

/// Every `.rs` file under `dir`, recursively.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The file's text without comments (a path in a doc comment is not an edge).
fn code(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The identifiers that follow each occurrence of `prefix` (`crate::`, `super::`): one
/// for a plain path, each top-level name of a `{…}` group.
fn names_after(text: &str, prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        let preceded_by_ident = rest[..i].chars().last().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
        rest = &rest[i + prefix.len()..];
        if preceded_by_ident {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let (mut depth, mut end) = (0, group.len());
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        end = j;
                        break;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            let mut depth = 0;
            let mut item = String::new();
            for c in group[..end].chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.push(first_ident(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            found.push(first_ident(&item));
        } else {
            found.push(first_ident(rest));
        }
    }
    found.into_iter().filter(|n| !n.is_empty()).collect()
}

fn first_ident(text: &str) -> String {
    text.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

/// `src/a/b.rs` -> `a`, `src/a.rs` -> `a`; None for the crate root files.
fn top_level(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).unwrap();
    let first = relative.components().next()?.as_os_str().to_string_lossy().into_owned();
    let name = first.trim_end_matches(".rs").to_string();
    (!["lib", "main"].contains(&name.as_str())).then_some(name)
}

fn cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(node: &str, graph: &Graph, path: &mut Vec<String>, done: &mut BTreeSet<String>) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut found = path[start..].to_vec();
            found.push(node.to_string());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

/// The generated files the registry includes, as part of the module that includes them.
fn generated(name: &str) -> Option<String> {
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    let mut found: Vec<PathBuf> = Vec::new();
    for profile in ["debug", "release", "dist"] {
        let build = out.join(profile).join("build");
        for entry in std::fs::read_dir(&build).into_iter().flatten().flatten() {
            let file = entry.path().join("out").join(name);
            if entry.file_name().to_string_lossy().starts_with("toolgate-") && file.exists() {
                found.push(file);
            }
        }
    }
    found.sort_by_key(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok());
    found.last().map(|f| std::fs::read_to_string(f).unwrap())
}

#[test]
fn the_top_level_modules_form_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let mut graph = Graph::new();
    for file in &all {
        let Some(from) = top_level(&src, file) else { continue };
        let mut text = code(file);
        // The registry's module includes generated code: its paths are the module's.
        for include in ["registry.rs", "dispatch.rs", "args.rs"] {
            if text.contains(&format!("\"/{include}\"")) {
                text += &generated(include).unwrap_or_else(|| panic!("no generated {include}: build first"));
            }
        }
        for to in names_after(&text, "crate::") {
            if to != from {
                graph.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    assert!(graph.len() > 5, "the scan found too little: {graph:?}");
    if let Some(found) = cycle(&graph) {
        panic!("the top-level modules of src/ form a cycle: {}\n{graph:#?}", found.join(" -> "));
    }
}

#[test]
fn the_files_of_mcp_form_no_cycle() {
    folder_has_no_cycle("mcp");
}

#[test]
fn the_files_of_http_form_no_cycle() {
    folder_has_no_cycle("http");
}

fn folder_has_no_cycle(module: &str) {
    let mcp = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(module);
    let mut all = Vec::new();
    files(&mcp, &mut all);
    // A node is a file of mcp/ (a folder counts as one node for the files outside it);
    // inside a folder, its files are nodes of their own.
    let node = |file: &Path| -> Option<(String, String)> {
        let relative = file.strip_prefix(&mcp).unwrap();
        let parts: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().trim_end_matches(".rs").to_string())
            .collect();
        match parts.as_slice() {
            [only] if only == "mod" => None,
            [only] => Some((String::new(), only.clone())),
            [folder, file] if file == "mod" => Some((String::new(), folder.clone())),
            [folder, file] => Some((folder.clone(), file.clone())),
            _ => None,
        }
    };
    let mut graph = Graph::new();
    let names: BTreeSet<(String, String)> = all.iter().filter_map(|f| node(f)).collect();
    for file in &all {
        let Some((folder, name)) = node(file) else { continue };
        let text = code(file);
        let from = if folder.is_empty() { name.clone() } else { format!("{folder}/{name}") };
        let mut edge = |to: String| {
            if to != from && !from.starts_with(&format!("{to}/")) {
                graph.entry(from.clone()).or_default().insert(to);
            }
        };
        for to in names_after(&text, &format!("crate::{module}::")) {
            if names.contains(&(String::new(), to.clone())) {
                edge(to);
            }
        }
        // `super::` is the folder's parent for a top file, the folder's mod.rs inside it.
        let siblings = if file.ends_with("mod.rs") { String::new() } else { folder.clone() };
        for to in names_after(&text, "super::") {
            if names.contains(&(siblings.clone(), to.clone())) {
                edge(if siblings.is_empty() { to } else { format!("{siblings}/{to}") });
            }
        }
        for to in names_after(&text, "super::super::") {
            if names.contains(&(String::new(), to.clone())) {
                edge(to);
            }
        }
    }
    assert!(graph.len() > 5, "the scan of src/{module}/ found too little: {graph:?}");
    if let Some(found) = cycle(&graph) {
        panic!("the files of src/{module}/ form a cycle: {}\n{graph:#?}", found.join(" -> "));
    }
}

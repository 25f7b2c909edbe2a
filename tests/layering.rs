//! The layers point one way (domain <- store <- gate/fleet <- mcp <- http; agent <- domain), and Cargo enforces it:
//! the lower crates' normal dependency trees must hold no web framework, no HTTP stack and
//! not the server crate itself.

use std::process::Command;

const FORBIDDEN: &[&str] = &["axum", "hyper", "tower", "http", "toolgate"];

/// The crate names in a `cargo tree --prefix none` listing.
fn crate_names(tree: &str) -> Vec<&str> {
    tree.lines().filter_map(|l| l.split_whitespace().next()).collect()
}

fn normal_dependencies(package: &str) -> String {
    normal_dependencies_with(package, &[])
}

fn normal_dependencies_with(package: &str, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--locked", "--offline", "-e", "normal", "--prefix", "none", "-p", package])
        .args(extra)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "cargo tree -p {package} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn lower_layers_know_no_http_and_not_the_server() {
    for package in ["toolgate-policy", "toolgate-domain", "toolgate-store", "toolgate-gate", "toolgate-fleet"] {
        let tree = normal_dependencies(package);
        assert!(tree.lines().count() > 1, "{package}: cargo tree printed nothing:\n{tree}");
        let found: Vec<&str> = crate_names(&tree).into_iter().filter(|n| FORBIDDEN.contains(n)).collect();
        assert!(found.is_empty(), "{package} depends on {found:?}: it must not know HTTP or the server:\n{tree}");
    }
    // The check bites: the server crate itself does depend on axum.
    assert!(crate_names(&normal_dependencies("toolgate")).contains(&"axum"));
}

#[test]
fn each_layer_sees_only_the_ones_below() {
    let below = [
        ("toolgate-policy", &["toolgate-domain", "toolgate-store", "toolgate-gate", "toolgate-codegen"][..]),
        ("toolgate-domain", &["toolgate-store", "toolgate-gate", "toolgate-codegen"][..]),
        ("toolgate-store", &["toolgate-gate", "toolgate-codegen"][..]),
        ("toolgate-gate", &["toolgate-codegen"][..]),
        ("toolgate-fleet", &["toolgate-gate", "toolgate-codegen", "toolgate-agent"][..]),
    ];
    for (package, above) in below {
        let tree = normal_dependencies(package);
        let names = crate_names(&tree);
        for name in above {
            assert!(!names.contains(name), "{package} must not depend on {name}:\n{tree}");
        }
    }
}

/// The agent runs on endpoints: it shares the domain's wire types and nothing of the server
/// (no store, no SQLite, no gate, no web framework). Its WebSocket client needs the `http`
/// crate's types, so that one name is allowed here.
#[test]
fn the_agent_carries_nothing_of_the_server() {
    // The library, and the lean `toolgate-agent` binary with its command line.
    for tree in
        [normal_dependencies("toolgate-agent"), normal_dependencies_with("toolgate-agent", &["--features", "cli"])]
    {
        agent_tree_is_lean(&tree);
    }
}

fn agent_tree_is_lean(tree: &str) {
    let names = crate_names(tree);
    for name in [
        "toolgate-store",
        "toolgate-fleet",
        "toolgate-gate",
        "toolgate-codegen",
        "rusqlite",
        "axum",
        "hyper",
        "toolgate",
    ] {
        assert!(!names.contains(&name), "toolgate-agent must not depend on {name}:\n{tree}");
    }
    assert!(names.contains(&"toolgate-domain"), "{tree}");
}

/// The server links the catalogue's checks, never the generator: `toolgate-codegen` (and
/// the Rust parsing and printing it needs) is a build dependency only.
#[test]
fn the_server_binary_links_no_generator() {
    let tree = normal_dependencies_with("toolgate", &["-e", "no-proc-macro"]);
    let names = crate_names(&tree);
    for name in ["toolgate-codegen", "syn", "quote", "prettyplease", "proc-macro2"] {
        assert!(!names.contains(&name), "the server must not link {name}:\n{tree}");
    }
    assert!(names.contains(&"toolgate-catalogue"), "{tree}");
}

//! How the MCP clients people use connect to toolgate, made in one place: the first start
//! prints some of them with the real URL and token, and docs/clients.md holds all of them with
//! placeholders (a test writes them from here, so the page cannot drift from what works).

use serde_json::{Value, json};

/// The `mcp-remote` Claude Desktop runs: pinned, so a new release cannot change what a pasted
/// snippet does (the suite runs this very version against the server).
pub const MCP_REMOTE: &str = "mcp-remote@0.15.1";

/// The name the server is given in every client's configuration.
const NAME: &str = "toolgate";

/// Claude Desktop's `claude_desktop_config.json` entry: Desktop speaks stdio, so `mcp-remote`
/// bridges it to the server. The token goes in `env` and the header in `args` has no space:
/// Claude Desktop on Windows does not quote arguments, and a space would split the header
/// (mcp-remote's own advice).
pub fn claude_desktop(url: &str, token: &str) -> Value {
    json!({"mcpServers": {NAME: {
        "command": "npx",
        "args": ["-y", MCP_REMOTE, url, "--header", "Authorization:${TOOLGATE_AUTH}"],
        "env": {"TOOLGATE_AUTH": format!("Bearer {token}")}
    }}})
}

/// Claude Code, which speaks Streamable HTTP itself.
pub fn claude_code(url: &str, token: &str) -> String {
    format!("claude mcp add --transport http {NAME} {url} --header \"Authorization: Bearer {token}\"")
}

/// VS Code's `.vscode/mcp.json`: the token is asked for once and kept by VS Code, never
/// written into the file.
pub fn vscode(url: &str) -> Value {
    json!({
        "inputs": [{"type": "promptString", "id": "toolgate-token", "description": "toolgate token (tg_...)", "password": true}],
        "servers": {NAME: {"type": "http", "url": url, "headers": {"Authorization": "Bearer ${input:toolgate-token}"}}}
    })
}

/// Cursor's `~/.cursor/mcp.json` (or the project's `.cursor/mcp.json`).
pub fn cursor(url: &str, token: &str) -> Value {
    json!({"mcpServers": {NAME: {"url": url, "headers": {"Authorization": format!("Bearer {token}")}}}})
}

/// The MCP Inspector's command line: every tool, listed.
pub fn inspector(url: &str, token: &str) -> String {
    format!(
        "npx -y @modelcontextprotocol/inspector --cli --server-url {url} --transport http --header \"Authorization: Bearer {token}\" --method tools/list"
    )
}

/// How a person runs this very binary again from the shell that started it: `toolgate` when
/// that is what PATH finds, else its path (relative to the working directory when under it,
/// as `cargo run` leaves it: `target/release/toolgate`).
pub fn this_command() -> String {
    let Ok(me) = std::env::current_exe() else { return NAME.into() };
    let on_path = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| dir.join(NAME).canonicalize().ok() == me.canonicalize().ok())
    });
    if on_path {
        return NAME.into();
    }
    let here = std::env::current_dir().ok();
    match here.as_deref().and_then(|dir| me.strip_prefix(dir).ok()) {
        Some(relative) => relative.display().to_string(),
        None => me.display().to_string(),
    }
}

/// The placeholders docs/clients.md is written with.
pub const EXAMPLE_URL: &str = "http://127.0.0.1:8080/mcp";
pub const EXAMPLE_TOKEN: &str = "tg_...";

/// Every snippet docs/clients.md shows: (its block's name, its language, the snippet).
pub fn documented() -> Vec<(&'static str, &'static str, String)> {
    let pretty = |v: Value| serde_json::to_string_pretty(&v).expect("a snippet serializes");
    vec![
        ("claude-code", "bash", claude_code(EXAMPLE_URL, EXAMPLE_TOKEN)),
        ("claude-desktop", "json", pretty(claude_desktop(EXAMPLE_URL, EXAMPLE_TOKEN))),
        ("vscode", "json", pretty(vscode(EXAMPLE_URL))),
        ("cursor", "json", pretty(cursor(EXAMPLE_URL, EXAMPLE_TOKEN))),
        ("inspector", "bash", inspector(EXAMPLE_URL, EXAMPLE_TOKEN)),
    ]
}

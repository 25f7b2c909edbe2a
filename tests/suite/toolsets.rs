//! Toolsets (issue 48, docs/toolsets.md): what a client is shown, chosen by its tier's default,
//! a header or a path; what it may do stays the gate's alone.

use serde_json::{Value, json};

use crate::common::{self, Server, request_to, start};

const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;

fn names(listed: &Value) -> Vec<String> {
    let tools = listed["result"]["tools"].as_array().unwrap_or_else(|| panic!("no tools: {listed}"));
    tools.iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

fn list_at(s: &Server, path: &str, headers: &[(&str, &str)]) -> common::Response {
    let auth = format!("Bearer {}", s.token);
    let mut all = vec![("Authorization", auth.as_str())];
    all.extend_from_slice(headers);
    request_to(s.addr, "POST", path, &all, Some(LIST))
}

/// The catalogue's toolset of each tool, from tools.yaml as the build read it.
fn toolset_of(name: &str) -> String {
    let tools = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tools.yaml")).unwrap();
    let mut current = "";
    for line in tools.lines() {
        if let Some(n) = line.strip_prefix("  - name: ") {
            current = n.trim();
        }
        if let Some(set) = line.strip_prefix("    toolset: ")
            && current == name
        {
            return set.trim().to_string();
        }
    }
    panic!("{name} has no toolset")
}

#[test]
fn the_tier_default_is_the_fleet_and_the_core_and_a_header_or_path_chooses_more() {
    let s = start(&[]);
    let default = names(&list_at(&s, "/mcp", &[]).json());
    assert!(default.contains(&"find_tools".to_string()) && default.contains(&"list_agents".to_string()), "{default:?}");
    for name in &default {
        assert!(["fleet", "discovery"].contains(&toolset_of(name).as_str()), "{name} is in the default list");
    }
    // What the server serves is what the snapshots pin (the demo token is operator-tier).
    let tier = toolgate::registry::Tier::from_name("operator").unwrap();
    let generated: Value = serde_json::from_str(toolgate::registry::TOOLS_LIST_DEFAULT_BY_TIER[tier.index()]).unwrap();
    assert_eq!(names(&json!({"result": {"tools": generated}})), default);
    let everything = names(&list_at(&s, "/mcp", &[("X-MCP-Toolsets", "all")]).json());
    assert!(everything.len() > default.len() + 20, "{} vs {}", everything.len(), default.len());

    let by_header = names(&list_at(&s, "/mcp", &[("X-MCP-Toolsets", "executions, targeting")]).json());
    let by_path = names(&list_at(&s, "/mcp/x/executions,targeting", &[]).json());
    let encoded = names(&list_at(&s, "/mcp/x/executions%2Ctargeting/", &[]).json());
    assert_eq!(by_header, by_path);
    assert_eq!(by_header, encoded);
    assert!(by_header.contains(&"execute_instruction".to_string()) && by_header.contains(&"set_tag".to_string()));
    assert!(!by_header.contains(&"list_agents".to_string()), "{by_header:?}");
    for name in &by_header {
        assert!(["executions", "targeting", "discovery"].contains(&toolset_of(name).as_str()), "{name}");
    }
    let dynamic = names(&list_at(&s, "/mcp/x/dynamic", &[]).json());
    assert!(dynamic.iter().all(|n| toolset_of(n) == "discovery") && dynamic.contains(&"enable_toolset".to_string()));
    let default_word = names(&list_at(&s, "/mcp", &[("X-MCP-Toolsets", "default")]).json());
    assert_eq!(default_word, default);
}

#[test]
fn an_unknown_toolset_is_refused_with_the_closest_name_and_every_valid_one() {
    let s = start(&[]);
    for (path, headers) in [("/mcp", vec![("X-MCP-Toolsets", "fleet,executoins")]), ("/mcp/x/fleet,executoins", vec![])]
    {
        let refused = list_at(&s, path, &headers);
        let body = refused.json();
        assert_eq!(body["error"]["code"], -32602, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("`executoins` (did you mean `executions`?)"), "{message}");
        assert!(message.contains("discovery, fleet, targeting"), "{message}");
    }
    let both = list_at(&s, "/mcp/x/fleet", &[("X-MCP-Toolsets", "executions")]);
    assert_eq!(both.status, 400, "{both:?}");
    assert!(both.body.contains("make one choice"), "{both:?}");
}

/// What a client sees is not what it may do: a tool outside the chosen toolsets answers when
/// called by name, and one the tier refuses is refused whatever the list shows.
#[test]
fn a_call_outside_the_chosen_toolsets_is_decided_by_the_gate_alone() {
    let s = start(&[]);
    let auth = format!("Bearer {}", s.token);
    let call = |toolsets: &str, name: &str| {
        let body =
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": {}}});
        let headers =
            [("Authorization", auth.as_str()), ("X-MCP-Toolsets", toolsets), ("MCP-Protocol-Version", "2025-11-25")];
        request_to(s.addr, "POST", "/mcp", &headers, Some(&body.to_string())).json()
    };
    let listed = call("dynamic", "list_definitions");
    assert!(listed["result"]["structuredContent"]["definitions"].is_array(), "{listed}");
    // The demo token's tier (operator) may not mint tokens, whatever the client chose to see.
    let refused = call("all", "create_api_token");
    assert!(refused.get("error").is_some() || refused["result"]["isError"] == true, "{refused}");
    let hidden = call("dynamic", "create_api_token");
    assert_eq!(hidden["error"]["code"], refused["error"]["code"], "{hidden}");
    assert_eq!(hidden["error"]["message"], refused["error"]["message"], "{hidden}");
}

/// The share of `questions` (question<TAB>tool lines) whose tool find_tools ranks in its first
/// three, and the misses.
fn first_three_rate(questions: &str) -> (usize, usize, Vec<String>) {
    let s = start(&[]);
    let token = s.token("admin", "supervised", "1d");
    let (mut asked, mut misses) = (0, Vec::new());
    for line in questions.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let (question, expected) = line.split_once('\t').unwrap_or_else(|| panic!("no tab: {line}"));
        let found = common::call_as(&s, &token, "find_tools", json!({"query": question, "limit": 3})).json();
        let matches =
            found["result"]["structuredContent"]["matches"].as_array().cloned().unwrap_or_else(|| panic!("{found}"));
        let top: Vec<&str> = matches.iter().map(|m| m["name"].as_str().unwrap()).collect();
        asked += 1;
        if !top.contains(&expected) {
            misses.push(format!("{question} -> {expected}, got {top:?}"));
        }
    }
    (100 * (asked - misses.len()) / asked.max(1), asked, misses)
}

/// find_tools ranks the tool an administrator needs among its first three for at least 90% of
/// the questions in tests/data/find_tools_questions.tsv (written from the docs' use cases).
#[test]
fn find_tools_ranks_the_needed_tool_in_its_first_three_for_nine_questions_in_ten() {
    let (hit, asked, misses) = first_three_rate(include_str!("../data/find_tools_questions.tsv"));
    assert!(asked >= 60, "only {asked} questions");
    eprintln!("find_tools: {hit}% of {asked} questions in the first three; missed:\n{}", misses.join("\n"));
    assert!(hit >= 90, "{hit}% of {asked}; missed:\n{}", misses.join("\n"));
}

/// The questions written to judge it on wording it was not tuned to
/// (tests/data/find_tools_holdout.tsv, eleven sets; docs/toolsets.md gives each one's rate when
/// first measured): 90.1% on 2026-12-05 with the experience tools. Held to the 90% issue 48 asks for, so that no change
/// makes it worse on questions like those it has not seen.
#[test]
fn find_tools_on_questions_it_was_not_tuned_to_does_not_get_worse() {
    let (hit, asked, misses) = first_three_rate(include_str!("../data/find_tools_holdout.tsv"));
    eprintln!("find_tools, held out: {hit}% of {asked} in the first three; missed:\n{}", misses.join("\n"));
    assert!(asked >= 800 && hit >= 90, "{hit}% of {asked}; missed:\n{}", misses.join("\n"));
}

/// A credential's default (`toolgate token create --toolsets`) is what its client sees when
/// it chooses nothing; a header still chooses per request; a name that is not a toolset is
/// refused when the token is made, naming the closest.
#[test]
fn a_tokens_toolsets_are_its_clients_default_list() {
    let s = start(&[]);
    let out = s.cli(&[
        "token",
        "create",
        "--principal",
        "admin",
        "--tier",
        "operator",
        "--toolsets",
        "oversight, executions",
    ]);
    let token = out.split_whitespace().find(|w| w.starts_with("tg_")).unwrap_or_else(|| panic!("{out}")).to_string();
    let list = |headers: &[(&str, &str)]| {
        let auth = format!("Bearer {token}");
        let mut all = vec![("Authorization", auth.as_str())];
        all.extend_from_slice(headers);
        names(&request_to(s.addr, "POST", "/mcp", &all, Some(LIST)).json())
    };
    let default = list(&[]);
    assert!(
        default.contains(&"list_pending_approvals".to_string()) && default.contains(&"query_responses".to_string())
    );
    for name in &default {
        assert!(["oversight", "executions", "discovery"].contains(&toolset_of(name).as_str()), "{name}");
    }
    assert!(list(&[("X-MCP-Toolsets", "fleet")]).contains(&"list_agents".to_string()));
    let wrong = s.cli_output(&["token", "create", "--principal", "admin", "--tier", "operator", "--toolsets", "flet"]);
    let said = String::from_utf8_lossy(&wrong.stderr);
    assert!(!wrong.status.success() && said.contains("`flet` (did you mean `fleet`?)"), "{said}");
}

/// In a session, enable_toolset grows the session's list (the Python SDK hears the
/// list_changed, scripts/clients/py_toolsets.py); without one it says how to ask instead.
#[test]
fn enable_toolset_grows_a_sessions_list_and_tells_a_sessionless_client_how_to_ask() {
    let s = start(&[]);
    let sid = common::initialize(&s, &s.token, json!({}));
    let auth = format!("Bearer {}", s.token);
    let in_session = |body: &Value| {
        let headers = [
            ("Authorization", auth.as_str()),
            ("Mcp-Session-Id", sid.as_str()),
            ("MCP-Protocol-Version", "2025-11-25"),
        ];
        request_to(s.addr, "POST", "/mcp", &headers, Some(&body.to_string())).json()
    };
    let list: Value = serde_json::from_str(LIST).unwrap();
    assert!(!names(&in_session(&list)).contains(&"set_tag".to_string()));
    let enable = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                        "params": {"name": "enable_toolset", "arguments": {"toolset": "targeting"}}});
    let enabled = in_session(&enable)["result"]["structuredContent"].clone();
    assert_eq!(enabled["listed"], true, "{enabled}");
    assert!(enabled["tools"].as_array().unwrap().contains(&json!("set_tag")), "{enabled}");
    let grown = names(&in_session(&list));
    assert!(grown.contains(&"set_tag".to_string()) && grown.contains(&"list_agents".to_string()), "{grown:?}");

    let sessionless = common::call_as(&s, &s.token, "enable_toolset", json!({"toolset": "targeting"})).json();
    let answer = &sessionless["result"]["structuredContent"];
    assert_eq!(answer["listed"], false, "{sessionless}");
    let how = answer["how"].as_str().unwrap();
    assert!(how.contains("X-MCP-Toolsets: discovery,fleet,targeting") && how.contains("/mcp/x/"), "{how}");
    let wrong = common::call_as(&s, &s.token, "enable_toolset", json!({"toolset": "exec"})).json();
    assert_eq!(wrong["result"]["isError"], true, "{wrong}");
    assert!(wrong.to_string().contains("the toolsets are: discovery, fleet"), "{wrong}");
}

/// find_tools' compact listing: one line, the required arguments, read-only or not, whether
/// this caller may call it now, and full schemas for up to five names.
#[test]
fn find_tools_says_what_each_tool_needs_and_whether_the_caller_may_call_it() {
    let s = start(&[]);
    let found =
        common::call_as(&s, &s.token, "find_tools", json!({"query": "delete a tag", "tools": ["delete_tag"]})).json();
    let content = &found["result"]["structuredContent"];
    let delete = content["matches"].as_array().unwrap().iter().find(|m| m["name"] == "delete_tag").cloned();
    let delete = delete.unwrap_or_else(|| panic!("{content}"));
    assert_eq!(delete["read_only"], false);
    assert_eq!(delete["may_call"], "after_approval", "operator: Tag:Delete needs a human");
    assert_eq!(delete["listed"], false, "targeting is not the operator's default");
    assert_eq!(delete["required"], json!(["agent_id", "key"]));
    assert_eq!(content["schemas"][0]["name"], "delete_tag");
    assert!(content["schemas"][0]["inputSchema"]["properties"]["approval_id"].is_object());
    let overview = common::call_as(&s, &s.token, "find_tools", json!({})).json();
    let toolsets = overview["result"]["structuredContent"]["toolsets"].as_array().cloned().unwrap();
    assert!(toolsets.iter().any(|t| t["name"] == "fleet" && t["listed"] == true), "{toolsets:?}");
    let too_many = common::call_as(&s, &s.token, "find_tools", json!({"tools": ["a", "b", "c", "d", "e", "f"]})).json();
    assert!(too_many.get("error").is_some() || too_many["result"]["isError"] == true, "{too_many}");
    let unknown = common::call_as(&s, &s.token, "find_tools", json!({"tools": ["delete_tags"]})).json();
    assert!(unknown.to_string().contains("did you mean `delete_tag`?"), "{unknown}");
}

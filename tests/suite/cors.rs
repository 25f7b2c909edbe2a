//! CORS for browser-based MCP clients (issue 47): the MCP endpoint and the OAuth metadata
//! answer a listed origin's preflight and expose what an MCP client reads; any other origin
//! gets no CORS headers. (scripts/console/browser_test.py does the same from real pages.)

use crate::common::{request, request_to, start};

const PAGE: &str = "http://127.0.0.2:3000";

fn preflight(s: &crate::common::Server, path: &str, origin: &str, headers: &str) -> crate::common::Response {
    request_to(
        s.addr,
        "OPTIONS",
        path,
        &[("Origin", origin), ("Access-Control-Request-Method", "POST"), ("Access-Control-Request-Headers", headers)],
        None,
    )
}

#[test]
fn a_listed_origin_is_answered_and_any_other_is_not() {
    let s = start(&["--allowed-origin", PAGE]);
    let asked = "authorization, content-type, mcp-protocol-version, mcp-session-id, mcp-param-region";
    let ok = preflight(&s, "/mcp", PAGE, asked);
    assert_eq!(ok.status, 204, "{ok:?}");
    assert_eq!(ok.header("access-control-allow-origin"), Some(PAGE));
    assert_eq!(ok.header("access-control-allow-headers"), Some(asked), "every header asked for, Mcp-Param-* too");
    assert!(ok.header("access-control-allow-methods").is_some_and(|m| m.contains("POST") && m.contains("DELETE")));
    assert_eq!(ok.header("access-control-allow-credentials"), None, "never credentials");

    let other = preflight(&s, "/mcp", "http://127.0.0.2:4000", "authorization");
    assert_eq!(other.status, 403, "{other:?}");
    assert_eq!(other.header("access-control-allow-origin"), None);
    let odd = preflight(&s, "/mcp", PAGE, "authorization, x-something-else");
    assert_eq!(odd.status, 403, "a header no MCP client sends: {odd:?}");

    // The answers themselves: readable by the listed page, with the headers a client needs.
    let auth = format!("Bearer {}", s.token);
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let headers = |origin: &'static str| {
        vec![
            ("Origin", origin),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2025-11-25"),
        ]
    };
    let mut listed = headers(PAGE);
    listed.push(("Authorization", auth.as_str()));
    let answer = request(s.addr, "POST", &listed, Some(body));
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("access-control-allow-origin"), Some(PAGE));
    let exposed = answer.header("access-control-expose-headers").unwrap_or_default().to_ascii_lowercase();
    for name in ["mcp-session-id", "mcp-protocol-version", "www-authenticate"] {
        assert!(exposed.contains(name), "{name} exposed: {exposed}");
    }
    let unauthenticated = request(s.addr, "POST", &headers(PAGE), Some(body));
    assert_eq!(unauthenticated.status, 401);
    assert_eq!(unauthenticated.header("access-control-allow-origin"), Some(PAGE), "a page reads its 401 too");
    let mut foreign = headers("http://127.0.0.2:4000");
    foreign.push(("Authorization", auth.as_str()));
    let refused = request(s.addr, "POST", &foreign, Some(body));
    assert_eq!((refused.status, refused.header("access-control-allow-origin")), (403, None));
    let plain = request(s.addr, "POST", &listed[1..], Some(body));
    assert_eq!(plain.header("access-control-allow-origin"), None, "no Origin, no CORS headers");

    // The OAuth metadata takes the same preflight.
    let metadata = preflight(&s, "/.well-known/oauth-protected-resource/mcp", PAGE, "");
    assert_eq!((metadata.status, metadata.header("access-control-allow-origin")), (204, Some(PAGE)), "{metadata:?}");
    let got = request_to(s.addr, "GET", "/.well-known/oauth-protected-resource/mcp", &[("Origin", PAGE)], None);
    assert_eq!(got.header("access-control-allow-origin"), Some(PAGE), "{got:?}");
}

#[test]
fn every_origin_allowed_is_answered_with_a_wildcard_never_with_credentials() {
    let s = start(&["--allowed-origin", "*"]);
    let ok = preflight(&s, "/mcp", "https://anywhere.example", "authorization");
    assert_eq!((ok.status, ok.header("access-control-allow-origin")), (204, Some("*")));
    assert_eq!(ok.header("access-control-allow-credentials"), None);
}

//! The HTTP edge of the real binary: authentication, limits, Host/Origin, methods.

use crate::common;

use common::{raw, request, request_to, start};
use serde_json::json;

const PING: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;

#[test]
fn healthz_needs_no_token() {
    let s = start(&[]);
    let r = request(s.addr, "PUT", &[], None);
    assert_eq!(r.status, 405, "{r:?}");
    assert_eq!(r.header("allow"), Some("GET, POST, DELETE"));
    assert_eq!(request(s.addr, "GET", &[], None).status, 401, "GET /mcp (a session's stream) authenticates");
    let text = format!("GET /healthz HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", s.addr);
    let r = raw(s.addr, text.as_bytes());
    assert_eq!((r.status, r.json()["status"].as_str()), (200, Some("ok")));
}

#[test]
fn every_authentication_failure_is_401_with_a_challenge() {
    let s = start(&[]);
    let revoked = s.token("admin", "readonly", "1d");
    let listing = s.cli(&["token", "list"]);
    let id = listing.lines().rfind(|l| l.contains("readonly")).unwrap().split_whitespace().next().unwrap().to_string();
    s.cli(&["token", "revoke", &id]);
    let expired = s.token("admin", "readonly", "1s");
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let cases: Vec<(&str, Vec<(&str, String)>)> = vec![
        ("missing", vec![]),
        ("unknown", vec![("Authorization", "Bearer tg_not_a_real_token".into())]),
        ("wrong scheme", vec![("Authorization", format!("Basic {}", s.token))]),
        ("revoked", vec![("Authorization", format!("Bearer {revoked}"))]),
        ("expired", vec![("Authorization", format!("Bearer {expired}"))]),
        ("session id is no credential", vec![("Mcp-Session-Id", "tgs-0123456789abcdef0123456789abcdef".into())]),
    ];
    for (case, headers) in cases {
        let refs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = request(s.addr, "POST", &refs, Some(PING));
        assert_eq!(r.status, 401, "{case}: {r:?}");
        assert!(r.header("www-authenticate").is_some_and(|h| h.starts_with("Bearer")), "{case}: {r:?}");
        assert_eq!(r.json()["error"], "unauthorized", "{case}");
    }
    let ok = request(s.addr, "POST", &[("X-Toolgate-Token", &s.token)], Some(PING));
    assert_eq!(ok.status, 200, "X-Toolgate-Token works too: {ok:?}");
}

#[test]
fn token_cli_refuses_what_it_cannot_do() {
    let s = start(&[]);
    for (args, why) in [
        (vec!["token", "create", "--principal", "admin", "--tier", "operater"], "did you mean `operator`"),
        (
            vec!["token", "create", "--principal", "admin", "--tier", "operator", "--expires-in", "91d"],
            "at most 90 days",
        ),
        (vec!["token", "create", "--principal", "nobody", "--tier", "operator"], "no principal `nobody`"),
        (vec!["token", "revoke", "tok_nope"], "no active token"),
    ] {
        let out = std::process::Command::new(common::bin())
            .args(&args)
            .arg("--data-dir")
            .arg(s.data_dir.path())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(why), "{args:?}: {stderr}");
    }
    assert!(!s.cli(&["token", "list"]).contains(&s.token), "token list never shows secrets");
}

#[test]
fn bodies_are_refused_before_they_are_read() {
    let s = start(&[]);
    let auth = format!("Bearer {}", s.token);
    let big = format!("{}", 4 * 1024 * 1024 + 1);
    // (headers, status, error)
    type Case<'a> = (Vec<(&'a str, &'a str)>, u16, &'a str);
    let cases: Vec<Case> = vec![
        (vec![("Authorization", &auth), ("Content-Length", &big)], 413, "payload_too_large"),
        (vec![("Authorization", &auth), ("Transfer-Encoding", "chunked")], 411, "length_required"),
        (vec![("Authorization", &auth), ("Content-Encoding", "gzip")], 415, "unsupported_encoding"),
    ];
    for (headers, status, error) in cases {
        let r = request(s.addr, "POST", &headers, Some(PING));
        assert_eq!((r.status, r.json()["error"].as_str()), (status, Some(error)), "{r:?}");
        assert_eq!(r.header("connection"), Some("close"));
    }
    let text = format!("POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: {auth}\r\nConnection: close\r\n\r\n", s.addr);
    assert_eq!(raw(s.addr, text.as_bytes()).status, 411, "no Content-Length at all");
    // The server still answers on a fresh connection afterwards.
    assert_eq!(s.post(&[], PING).status, 200);
}

#[test]
fn a_refused_body_does_not_poison_keep_alive() {
    use std::io::{Read, Write};
    let s = start(&[]);
    let mut stream = std::net::TcpStream::connect(s.addr).unwrap();
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Encoding: br\r\nContent-Length: 5000\r\n\r\n",
        s.addr, s.token
    );
    stream.write_all(head.as_bytes()).unwrap();
    let _ = stream.write_all(&[b'x'; 5000]);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 415"), "{text}");
    assert_eq!(text.matches("HTTP/1.1").count(), 1, "the unread body was not parsed as a second request: {text}");
}

#[test]
fn foreign_origin_and_host_are_403() {
    let s = start(&["--allowed-origin", "https://app.example.com"]);
    let auth = format!("Bearer {}", s.token);
    for origin in ["https://evil.example.com", "null"] {
        let r = request(s.addr, "POST", &[("Authorization", auth.as_str()), ("Origin", origin)], Some(PING));
        assert_eq!((r.status, r.error_code()), (403, -32008), "the MCP endpoint answers in JSON-RPC: {r:?}");
        let data = &r.json()["error"]["data"];
        assert_eq!(data["correlation_id"].as_str(), r.header("x-correlation-id"), "{r:?}");
        assert!(data["remediation"].as_str().unwrap().contains("--allowed-origin"), "{r:?}");
        let api = request_to(
            s.addr,
            "GET",
            "/api/v1/approvals",
            &[("Authorization", auth.as_str()), ("Origin", origin)],
            None,
        );
        assert_eq!((api.status, api.json()["error"].as_str()), (403, Some("forbidden_origin")), "{api:?}");
    }
    let r = request(s.addr, "POST", &[("Authorization", auth.as_str()), ("Host", "evil.example.com")], Some(PING));
    assert_eq!((r.status, r.json()["error"].as_str()), (403, Some("forbidden_host")), "{r:?}");
    for origin in ["http://localhost:3000", "http://127.0.0.1", "https://app.example.com"] {
        let r = request(
            s.addr,
            "POST",
            &[("Authorization", auth.as_str()), ("Origin", origin), ("Host", "localhost")],
            Some(PING),
        );
        assert_eq!(r.status, 200, "{origin}: {r:?}");
    }
}

#[test]
fn malformed_json_rpc() {
    let s = start(&[]);
    let deep = "[".repeat(65) + &"]".repeat(65);
    for (body, code) in [
        ("{", -32700),
        (deep.as_str(), -32700),
        (r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#, -32600),
        (r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#, -32600),
        (r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#, -32600),
        (r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}"#, -32600),
        (r#"{"jsonrpc":"2.0","id":1}"#, -32600),
        ("[]", -32600),
        ("42", -32600),
    ] {
        let r = s.post(&[], body);
        assert_eq!((r.status, r.error_code()), (400, code), "{body}: {r:?}");
    }
    let r = s.post(&[], &json!({"jsonrpc": "2.0", "id": "x", "method": "nope/nope"}).to_string());
    assert_eq!((r.status, r.error_code(), r.json()["id"].clone()), (200, -32601, json!("x")));
}

#[test]
fn sigterm_stops_gracefully() {
    let s = start(&[]);
    let pid = s.pid().to_string();
    let status = std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(status.success());
    let code = s.wait_for_exit(std::time::Duration::from_secs(10));
    assert_eq!(code, Some(0), "exits 0 after SIGTERM");
}

/// A token revoked on the console (another process, behind the server's authentication
/// cache) stops working: the cache lives at most --auth-cache-ttl-ms (its bound is pinned
/// with an injected clock in the store's tests; here the bound is generous, never flaky).
#[test]
fn a_token_revoked_on_the_console_stops_working() {
    let s = start(&["--auth-cache-ttl-ms", "1000"]);
    let token = s.token("admin", "readonly", "1d");
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let auth = format!("Bearer {token}");
    assert_eq!(request(s.addr, "POST", &[("Authorization", &auth)], Some(ping)).status, 200, "cached now");
    let listing = s.cli(&["token", "list"]);
    let id = listing.lines().rfind(|l| l.contains("readonly")).unwrap().split_whitespace().next().unwrap().to_string();
    s.cli(&["token", "revoke", &id]);
    let revoked_at = std::time::Instant::now();
    loop {
        if request(s.addr, "POST", &[("Authorization", &auth)], Some(ping)).status == 401 {
            break;
        }
        assert!(revoked_at.elapsed() < std::time::Duration::from_secs(20), "the revocation was never honoured");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

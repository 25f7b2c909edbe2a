//! The approver's console from a test: a reviewer signed in with a password and an enrolled
//! TOTP factor (the code computed from the secret the enrollment page shows), and decisions
//! made over REST with that session's cookie and CSRF token.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::json;

use super::{Response, Server, bin, request_to};

/// A signed-in reviewer: their console session, their factor's secret, and an API credential
/// for the read-only approval and audit API.
pub struct Reviewer {
    pub name: String,
    pub password: String,
    pub cookie: String,
    pub csrf: String,
    pub secret: String,
    pub api: String,
}

/// The TOTP code of `secret` for the 30 s step `steps_ahead` steps from now.
pub fn code(secret: &str, name: &str, steps_ahead: i64) -> String {
    let bytes = totp_rs::Secret::Encoded(secret.to_string()).to_bytes().unwrap();
    let totp =
        totp_rs::TOTP::new(totp_rs::Algorithm::SHA1, 6, 0, 30, bytes, Some("toolgate".into()), name.into()).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    totp.generate((now + steps_ahead * 30).max(0) as u64)
}

/// Percent-encodes a form value.
pub fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub fn form(fields: &[(&str, &str)]) -> String {
    fields.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect::<Vec<_>>().join("&")
}

/// The value of cookie `name` among the response's `Set-Cookie` headers.
pub fn set_cookie(r: &Response, name: &str) -> Option<String> {
    r.headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("set-cookie"))
        .filter_map(|(_, v)| v.split(';').next()?.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

/// The first `value="…"` after `marker` in a page.
pub fn value_after(page: &str, marker: &str) -> Option<String> {
    let rest = &page[page.find(marker)? + marker.len()..];
    let rest = &rest[rest.find("value=\"")? + 7..];
    Some(rest[..rest.find('"')?].to_string())
}

/// The text of the element with `id` (`id="x">text<`).
pub fn text_of(page: &str, id: &str) -> Option<String> {
    let marker = format!("id=\"{id}\">");
    let rest = &page[page.find(&marker)? + marker.len()..];
    Some(rest[..rest.find('<')?].to_string())
}

pub fn get(s: &Server, path: &str, cookie: &str) -> Response {
    let cookie = format!("toolgate_console={cookie}");
    request_to(s.addr, "GET", path, &[("Cookie", cookie.as_str())], None)
}

pub fn post_form(s: &Server, path: &str, cookie: &str, fields: &[(&str, &str)]) -> Response {
    let headers = [("Cookie", cookie), ("Content-Type", "application/x-www-form-urlencoded")];
    request_to(s.addr, "POST", path, &headers, Some(&form(fields)))
}

pub fn set_password(s: &Server, name: &str, password: &str) -> std::process::Output {
    let mut child = Command::new(bin())
        .args(["principal", "set-password", name])
        .args(s.store_args())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(format!("{password}\n").as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// Submits the sign-in form (with the CSRF cookie and token the form page handed out).
pub fn sign_in(s: &Server, name: &str, password: &str, code: &str) -> Response {
    let page = request_to(s.addr, "GET", "/console/sign-in", &[], None);
    let csrf_cookie = set_cookie(&page, "toolgate_sign_in").expect("the form's CSRF cookie");
    let csrf = value_after(&page.body, "name=\"csrf\"").expect("the form's CSRF token");
    let cookie = format!("toolgate_sign_in={csrf_cookie}");
    post_form(
        s,
        "/console/sign-in",
        &cookie,
        &[("csrf", &csrf), ("name", name), ("password", password), ("code", code)],
    )
}

/// A reviewer `name` (role Administrator) with a password, an enrolled factor and a session.
pub fn reviewer(s: &Server, name: &str) -> Reviewer {
    let api = super::api_credential(s, name);
    enrolled(s, name, api)
}

/// A reviewer `name` whose only role is Administrator on management group `group`: a
/// password, an enrolled factor, a session and an API credential.
pub fn group_reviewer(s: &Server, name: &str, group: &str) -> Reviewer {
    s.cli(&["principal", "add", name]);
    s.cli(&["group", "assign", group, name, "Administrator"]);
    let out = s.cli(&["token", "create", "--principal", name, "--api"]);
    let api = out.split_whitespace().find(|w| w.starts_with("tg_")).unwrap().to_string();
    enrolled(s, name, api)
}

/// `name`, who holds `api`, signed in to the console with a password and an enrolled factor.
fn enrolled(s: &Server, name: &str, api: String) -> Reviewer {
    let password = format!("{name} correct horse battery");
    let out = set_password(s, name, &password);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let signed = sign_in(s, name, &password, "");
    assert_eq!((signed.status, signed.header("location")), (303, Some("/console/enroll")), "{signed:?}");
    let cookie = set_cookie(&signed, "toolgate_console").expect("a session cookie");
    let enroll = get(s, "/console/enroll", &cookie);
    let secret = text_of(&enroll.body, "secret").expect("the secret on the enrollment page");
    let csrf = value_after(&enroll.body, "name=\"csrf\"").unwrap();
    let code = code(&secret, name, 0);
    let done =
        post_form(s, "/console/enroll", &format!("toolgate_console={cookie}"), &[("csrf", &csrf), ("code", &code)]);
    assert_eq!((done.status, done.header("location")), (303, Some("/console/approvals")), "{done:?}");
    Reviewer { name: name.into(), password, cookie, csrf, secret, api }
}

/// A decision over REST with the reviewer's console session.
pub fn decide(s: &Server, reviewer: &Reviewer, id: &str, verb: &str, body: serde_json::Value) -> Response {
    let cookie = format!("toolgate_console={}", reviewer.cookie);
    let headers = [("Cookie", cookie.as_str()), ("X-CSRF-Token", reviewer.csrf.as_str())];
    request_to(s.addr, "POST", &format!("/api/v1/approvals/{id}/{verb}"), &headers, Some(&body.to_string()))
}

/// Approves, once the held change's hosts have planned (a decision while some are still
/// planning is refused, saying so: the plans are what a person approves).
pub fn approve(s: &Server, reviewer: &Reviewer, id: &str) -> Response {
    let deadline = std::time::Instant::now() + super::agents::PATIENCE;
    loop {
        let r = decide(s, reviewer, id, "approve", json!({"comment": "ok"}));
        if r.status != 409 || !r.body.contains("still planning") || std::time::Instant::now() > deadline {
            return r;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A call that needs a person's approval, with `token` on `s`: its ticket, the reviewer's
/// approval (on `console`, which may be another replica), then the recall's result.
pub fn approved_on(
    s: &Server,
    console: &Server,
    reviewer: &Reviewer,
    token: &str,
    tool: &str,
    arguments: serde_json::Value,
) -> serde_json::Value {
    let id = super::agents::approval_id(&super::call_as(s, token, tool, arguments.clone()));
    assert_eq!(approve(console, reviewer, &id).status, 200);
    let mut recalled = arguments;
    recalled["approval_id"] = id.into();
    let answer = super::call_as(s, token, tool, recalled).json();
    assert_ne!(answer["result"]["isError"], true, "{tool}: {answer}");
    answer["result"]["structuredContent"].clone()
}

/// Signs `reviewer` in again (after a restart: sessions live in memory), with the code of the
/// next time step (the current one was taken already; a step either side is accepted).
pub fn sign_in_again(s: &Server, reviewer: &mut Reviewer) {
    let code = code(&reviewer.secret, &reviewer.name, 1);
    let signed = sign_in(s, &reviewer.name, &reviewer.password, &code);
    assert_eq!((signed.status, signed.header("location")), (303, Some("/console/approvals")), "{signed:?}");
    reviewer.cookie = set_cookie(&signed, "toolgate_console").expect("a session cookie");
    let page = get(s, "/console/approvals", &reviewer.cookie);
    reviewer.csrf = value_after(&page.body, "name=\"csrf\"").expect("the session's CSRF token");
}

/// The approvals page once it shows `needle` (a held change's plans arrive as its hosts
/// answer), and the digest of the plans its form carries.
pub fn page_with_plans(s: &Server, reviewer: &Reviewer, needle: &str) -> (String, String) {
    let deadline = std::time::Instant::now() + super::agents::PATIENCE;
    let page = loop {
        let page = get(s, "/console/approvals", &reviewer.cookie).body;
        if page.contains(needle) || std::time::Instant::now() > deadline {
            break page;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(page.contains(needle), "the approvals page never showed `{needle}`: {page}");
    let digest = page.split("name=\"plans\" value=\"").nth(1).and_then(|r| r.split('"').next());
    (page.clone(), digest.unwrap_or_else(|| panic!("no plans digest: {page}")).to_string())
}

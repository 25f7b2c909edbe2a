//! The console's HTML (maud: compiled templates, escaped by default). One layout; each page is
//! a function of what it shows. No JavaScript: forms post, the server answers a page.

use maud::{DOCTYPE, Markup, PreEscaped, html};

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0;color:#1d1d1f;background:#f6f6f8}
header{background:#1d2a3a;color:#fff;padding:.6rem 1.2rem;display:flex;gap:1.2rem;align-items:center}
header a{color:#cfe3ff;text-decoration:none}header .who{margin-left:auto}
main{padding:1.2rem;max-width:72rem}table{border-collapse:collapse;width:100%;background:#fff}
th,td{border:1px solid #ddd;padding:.4rem .5rem;text-align:left;vertical-align:top;font-size:.9rem}
th{background:#eef1f5}pre{margin:0;white-space:pre-wrap;font-size:.8rem}
.error{background:#fde8e8;border:1px solid #e0a0a0;padding:.6rem;margin-bottom:1rem}
.notice{background:#e8f4e8;border:1px solid #9c9;padding:.6rem;margin-bottom:1rem}
form.inline{display:inline}input,select,button{font-size:.95rem;margin:.15rem 0}
label{display:block;margin:.4rem 0}.muted{color:#666;font-size:.85rem}
.secret{font-family:monospace;font-size:1.1rem;letter-spacing:.1rem}
a.button{display:inline-block;padding:.3rem .7rem;border:1px solid #567;border-radius:3px;background:#eef1f5;color:#123;text-decoration:none}";

/// A time in seconds since the epoch, as RFC 3339 (UTC).
pub fn when(secs: i64) -> String {
    when_ms(secs.saturating_mul(1000))
}

/// A time in milliseconds since the epoch, as RFC 3339 (UTC, to the second).
pub fn when_ms(ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// What the header shows about the signed-in person.
pub struct Chrome<'a> {
    pub principal: Option<&'a str>,
    pub csrf: Option<&'a str>,
    /// The pages are reachable (the second factor is enrolled).
    pub enrolled: bool,
}

pub fn layout(title: &str, chrome: &Chrome<'_>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · toolgate console" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    strong { "toolgate" }
                    @if let (Some(who), Some(csrf)) = (chrome.principal, chrome.csrf) {
                        @if chrome.enrolled {
                            a href="/console/approvals" { "Approvals" }
                            a href="/console/reviews" { "Reviews" }
                            a href="/console/tokens" { "Tokens" }
                            a href="/console/audit" { "Audit" }
                            a href="/console/fleet" { "Fleet" }
                            a href="/console/uploads" { "Uploads" }
                        }
                        span.who {
                            "Signed in as " strong #who { (who) } " "
                            form.inline method="post" action="/console/sign-out" {
                                input type="hidden" name="csrf" value=(csrf);
                                button type="submit" { "Sign out" }
                            }
                        }
                    }
                }
                main { h1 { (title) } (body) }
            }
        }
    }
}

/// A decision form's step-up field: none while the session's last proof is fresh; for a
/// person signed in through the identity provider, a link to sign in there again instead.
pub fn step_up_code(fresh: bool, via_idp: bool) -> Markup {
    html! {
        @if !fresh && via_idp {
            a.button #step-up href="/console/oidc/start?step_up=1" { "Sign in again to decide" }
        } @else if !fresh {
            label { "Code " input type="text" name="code" inputmode="numeric" autocomplete="one-time-code" required; }
        }
    }
}

/// A window in whole minutes, or seconds below one (`5 min`, `3 s`).
pub fn minutes(ms: i64) -> String {
    match ms {
        ms if ms >= 60_000 => format!("{} min", ms / 60_000),
        ms => format!("{} s", ms / 1000),
    }
}

pub fn messages(error: Option<&str>, notice: Option<&str>) -> Markup {
    html! {
        @if let Some(e) = error { div.error #error role="alert" { (e) } }
        @if let Some(n) = notice { div.notice #notice { (n) } }
    }
}

/// The sign-in page; `idp` names the identity provider people may sign in through.
pub fn sign_in(csrf: &str, error: Option<&str>, idp: Option<&str>) -> Markup {
    let body = html! {
        (messages(error, None))
        @if let Some(issuer) = idp {
            p { a.button #sign-in-idp href="/console/oidc/start" { "Sign in with your organisation's account" } }
            p.muted { "Through " (issuer) ". Or, with a local account:" }
        }
        form method="post" action="/console/sign-in" {
            input type="hidden" name="csrf" value=(csrf);
            label { "Name " input #name type="text" name="name" autocomplete="username" required; }
            label { "Password " input #password type="password" name="password" autocomplete="current-password" required; }
            label { "Code from your authenticator app " input #code type="text" name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}"; }
            p.muted { "Leave the code empty on your first sign-in: you will enroll an authenticator app next." }
            button #sign-in type="submit" { "Sign in" }
        }
    };
    layout("Sign in", &Chrome { principal: None, csrf: None, enrolled: false }, body)
}

pub fn enroll(principal: &str, csrf: &str, secret: &str, qr_svg: &str, error: Option<&str>) -> Markup {
    let body = html! {
        (messages(error, None))
        p { "Approvals and new credentials need a second factor. Scan this code with an authenticator app
             (any RFC 6238 app), then type the six digits it shows." }
        div #qr { (PreEscaped(qr_svg)) }
        p { "Or enter the secret by hand: " span.secret #secret { (secret) } }
        form method="post" action="/console/enroll" {
            input type="hidden" name="csrf" value=(csrf);
            label { "Code " input #code type="text" name="code" inputmode="numeric" autocomplete="one-time-code" required; }
            button #enroll type="submit" { "Enroll" }
        }
    };
    layout("Enroll a second factor", &Chrome { principal: Some(principal), csrf: Some(csrf), enrolled: false }, body)
}

/// A refusal page (a missing CSRF token, no console session, a role that does not review).
pub fn refused(title: &str, message: &str, chrome: &Chrome<'_>) -> Markup {
    layout(title, chrome, html! { (messages(Some(message), None)) p { a href="/console" { "Back to the console" } } })
}

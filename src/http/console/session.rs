//! Console sessions: a random cookie (kept only as its hash), the principal, a CSRF token for
//! its forms, when it was last used (idle expiry) and when its holder last proved a TOTP code
//! (step-up). In memory: a restart signs everyone out, which is the safe way to lose them.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::http::HeaderMap;
use axum::http::header;
use toolgate_domain::secrets::{hash_secret, random_hex};

/// The session cookie.
pub const SESSION_COOKIE: &str = "toolgate_console";
/// The sign-in form's CSRF cookie (double submit: there is no session yet to keep it in).
pub const SIGN_IN_CSRF_COOKIE: &str = "toolgate_sign_in";
/// Sessions kept at most; past it the one unused longest goes.
const MAX_SESSIONS: usize = 10_000;

#[derive(Clone, Debug)]
pub struct ConsoleSession {
    pub principal: String,
    pub csrf: String,
    pub last_seen_ms: i64,
    /// When its holder last proved who they are (a TOTP code, or an authentication at the
    /// identity provider); None while a local account's factor is not enrolled.
    pub proof_ms: Option<i64>,
    /// How it was signed in, for the audit rows of what it does.
    pub assurance: String,
    /// Signed in through the identity provider: who, and the roles their groups brought.
    pub idp: Option<IdpSession>,
    /// How old a proof may be for a decision (`--console-step-up-window`), set when opened.
    pub step_up_ms: i64,
}

/// A session signed in through the organisation's identity provider (docs/sign-in.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdpSession {
    pub issuer: String,
    pub subject: String,
    /// Roles the IdP's groups brought at sign-in (never stored with the principal).
    pub roles: Vec<String>,
    pub group_roles: Vec<toolgate_domain::groups::GroupRole>,
}

impl ConsoleSession {
    /// Whether the last proof is recent enough for a decision (step-up).
    pub fn proof_fresh(&self, now_ms: i64) -> bool {
        self.proof_ms.is_some_and(|at| now_ms - at <= self.step_up_ms)
    }

    pub fn enrolled(&self) -> bool {
        self.proof_ms.is_some()
    }
}

pub struct ConsoleSessions {
    by_hash: Mutex<HashMap<String, ConsoleSession>>,
    idle_ms: i64,
    step_up_ms: i64,
}

impl ConsoleSessions {
    pub fn new(idle_ms: i64, step_up_ms: i64) -> Self {
        Self { by_hash: Mutex::default(), idle_ms, step_up_ms }
    }

    /// How old a proof may be for a decision.
    pub fn step_up_ms(&self) -> i64 {
        self.step_up_ms
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, ConsoleSession>> {
        self.by_hash.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens a session; returns the cookie's value (shown to the browser only).
    pub fn open(&self, mut session: ConsoleSession) -> String {
        session.step_up_ms = self.step_up_ms;
        let cookie = random_hex::<32>();
        let mut sessions = self.lock();
        let idle_ms = self.idle_ms;
        let now = session.last_seen_ms;
        sessions.retain(|_, s| now - s.last_seen_ms < idle_ms);
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions.iter().min_by_key(|(_, s)| s.last_seen_ms).map(|(k, _)| k.clone())
        {
            sessions.remove(&oldest);
        }
        sessions.insert(hash_secret(&cookie), session);
        cookie
    }

    /// The live session of `headers`' cookie, touched; an idle one is ended.
    pub fn current(&self, headers: &HeaderMap, now_ms: i64) -> Option<ConsoleSession> {
        let key = hash_secret(&cookie(headers, SESSION_COOKIE)?);
        let mut sessions = self.lock();
        let session = sessions.get_mut(&key)?;
        if now_ms - session.last_seen_ms >= self.idle_ms {
            sessions.remove(&key);
            return None;
        }
        session.last_seen_ms = now_ms;
        Some(session.clone())
    }

    /// Records a fresh TOTP proof (enrollment, or a step-up code).
    pub fn proved(&self, headers: &HeaderMap, now_ms: i64) {
        if let Some(key) = session_key(headers) {
            self.proved_by_key(&key, now_ms, "password+totp");
        }
    }

    /// Records a fresh proof for the session `key` names (an IdP's fresh sign-in comes back
    /// on a request from the IdP, which carries no same-site cookie).
    pub fn proved_by_key(&self, key: &str, at_ms: i64, assurance: &str) -> bool {
        match self.lock().get_mut(key) {
            Some(session) => {
                session.proof_ms = Some(at_ms);
                session.assurance = assurance.to_string();
                true
            }
            None => false,
        }
    }

    pub fn close(&self, headers: &HeaderMap) {
        if let Some(c) = cookie(headers, SESSION_COOKIE) {
            self.lock().remove(&hash_secret(&c));
        }
    }
}

/// The key the request's session is kept under (the hash of its cookie), if it has one.
pub fn session_key(headers: &HeaderMap) -> Option<String> {
    cookie(headers, SESSION_COOKIE).map(|c| hash_secret(&c))
}

/// A cookie's value from the request's `Cookie` headers.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Strict, Secure under TLS; `max_age` 0 clears it.
pub fn set_cookie(name: &str, value: &str, secure: bool, max_age_secs: Option<i64>) -> String {
    let mut text = format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict");
    if secure {
        text.push_str("; Secure");
    }
    if let Some(age) = max_age_secs {
        text.push_str(&format!("; Max-Age={age}"));
    }
    text
}

/// A form's CSRF token matches the expected one (compared in constant time).
pub fn csrf_matches(expected: &str, given: Option<&str>) -> bool {
    let Some(given) = given else { return false };
    expected.len() == given.len() && expected.bytes().zip(given.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(at: i64) -> ConsoleSession {
        ConsoleSession {
            principal: "p".into(),
            csrf: "c".into(),
            last_seen_ms: at,
            proof_ms: Some(at),
            assurance: "x".into(),
            idp: None,
            step_up_ms: 300_000,
        }
    }

    fn with_cookie(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, format!("other=1; {SESSION_COOKIE}={value}").parse().unwrap());
        headers
    }

    #[test]
    fn sessions_expire_when_idle_and_close() {
        let sessions = ConsoleSessions::new(1000, 300_000);
        let cookie = sessions.open(session(0));
        let headers = with_cookie(&cookie);
        assert!(sessions.current(&headers, 900).is_some());
        assert!(sessions.current(&headers, 1800).is_some(), "use moves the idle clock");
        assert!(sessions.current(&headers, 2800).is_none(), "idle too long");
        let cookie = sessions.open(session(3000));
        let headers = with_cookie(&cookie);
        sessions.close(&headers);
        assert!(sessions.current(&headers, 3001).is_none());
        assert!(sessions.current(&with_cookie("forged"), 3001).is_none());
    }

    #[test]
    fn step_up_and_csrf() {
        let s = session(0);
        assert!(s.proof_fresh(300_000));
        assert!(!s.proof_fresh(300_001));
        assert!(csrf_matches("abc", Some("abc")));
        assert!(!csrf_matches("abc", Some("abd")) && !csrf_matches("abc", None) && !csrf_matches("abc", Some("ab")));
    }
}

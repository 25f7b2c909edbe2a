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
    /// When its holder last proved a TOTP code; None while the factor is not enrolled.
    pub proof_ms: Option<i64>,
    /// How it was signed in, for the audit rows of what it does.
    pub assurance: &'static str,
}

impl ConsoleSession {
    /// Whether the last TOTP proof is recent enough for a decision (step-up).
    pub fn proof_fresh(&self, now_ms: i64) -> bool {
        self.proof_ms.is_some_and(|at| now_ms - at <= super::factor::STEP_UP_MS)
    }

    pub fn enrolled(&self) -> bool {
        self.proof_ms.is_some()
    }
}

pub struct ConsoleSessions {
    by_hash: Mutex<HashMap<String, ConsoleSession>>,
    idle_ms: i64,
}

impl ConsoleSessions {
    pub fn new(idle_ms: i64) -> Self {
        Self { by_hash: Mutex::default(), idle_ms }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, ConsoleSession>> {
        self.by_hash.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens a session; returns the cookie's value (shown to the browser only).
    pub fn open(&self, session: ConsoleSession) -> String {
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
        if let Some(key) = cookie(headers, SESSION_COOKIE).map(|c| hash_secret(&c))
            && let Some(session) = self.lock().get_mut(&key)
        {
            session.proof_ms = Some(now_ms);
            session.assurance = "password+totp";
        }
    }

    pub fn close(&self, headers: &HeaderMap) {
        if let Some(c) = cookie(headers, SESSION_COOKIE) {
            self.lock().remove(&hash_secret(&c));
        }
    }
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
        ConsoleSession { principal: "p".into(), csrf: "c".into(), last_seen_ms: at, proof_ms: Some(at), assurance: "x" }
    }

    fn with_cookie(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, format!("other=1; {SESSION_COOKIE}={value}").parse().unwrap());
        headers
    }

    #[test]
    fn sessions_expire_when_idle_and_close() {
        let sessions = ConsoleSessions::new(1000);
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
        assert!(s.proof_fresh(super::super::factor::STEP_UP_MS));
        assert!(!s.proof_fresh(super::super::factor::STEP_UP_MS + 1));
        assert!(csrf_matches("abc", Some("abc")));
        assert!(!csrf_matches("abc", Some("abd")) && !csrf_matches("abc", None) && !csrf_matches("abc", Some("ab")));
    }
}

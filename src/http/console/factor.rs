//! What a person proves when signing in to the console: a password (argon2id, PHC strings)
//! and a TOTP code (RFC 6238: SHA-1, 6 digits, 30 s steps, one step of clock skew either way),
//! each code accepted once (failed attempts lock: `toolgate_domain::lockout`).

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use totp_rs::{Algorithm, Secret, TOTP};

/// The shortest password `principal set-password` takes.
pub const MIN_PASSWORD_CHARS: usize = 12;
/// TOTP: RFC 6238's defaults, which every authenticator app reads from the QR code.
const STEP_SECS: u64 = 30;
const DIGITS: usize = 6;
/// The issuer authenticator apps show.
const ISSUER: &str = "toolgate";

#[derive(Debug, thiserror::Error)]
pub enum FactorError {
    #[error("a password needs at least {MIN_PASSWORD_CHARS} characters")]
    PasswordTooShort,
    #[error("the password could not be hashed: {0}")]
    Hash(String),
    #[error("the TOTP secret is not usable: {0}")]
    Secret(String),
}

pub fn hash_password(password: &str) -> Result<String, FactorError> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(FactorError::PasswordTooShort);
    }
    let salt = SaltString::encode_b64(&toolgate_domain::secrets::random_bytes::<16>())
        .map_err(|e| FactorError::Hash(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| FactorError::Hash(e.to_string()))
}

/// Checks `password` against `hash`; with no hash (unknown name, no password set) it checks
/// against a fixed one, so that the answer takes as long either way.
pub fn password_matches(hash: Option<&str>, password: &str) -> bool {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let decoy = DECOY.get_or_init(|| hash_password("decoy password, never matches").unwrap_or_default());
    let (hash, real) = match hash {
        Some(h) => (h, true),
        None => (decoy.as_str(), false),
    };
    let Ok(parsed) = PasswordHash::new(hash) else { return false };
    Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok() && real
}

/// A new TOTP secret (160 random bits, base32 as authenticator apps take it).
pub fn new_totp_secret() -> String {
    let bytes = toolgate_domain::secrets::random_bytes::<20>().to_vec();
    match Secret::Raw(bytes).to_encoded() {
        Secret::Encoded(text) => text,
        Secret::Raw(_) => unreachable!("to_encoded encodes"),
    }
}

fn totp(secret: &str, principal: &str) -> Result<TOTP, FactorError> {
    let bytes = Secret::Encoded(secret.to_string()).to_bytes().map_err(|e| FactorError::Secret(format!("{e:?}")))?;
    TOTP::new(Algorithm::SHA1, DIGITS, 0, STEP_SECS, bytes, Some(ISSUER.into()), principal.into())
        .map_err(|e| FactorError::Secret(e.to_string()))
}

/// The `otpauth://` URL an authenticator app enrolls from (shown as a QR code).
pub fn enrollment_url(secret: &str, principal: &str) -> Result<String, FactorError> {
    Ok(totp(secret, principal)?.get_url())
}

/// The time step `code` belongs to, if it is right for the step of `now_ms` or one either
/// side of it (clocks drift); None when it is not. The caller then takes the step once.
pub fn code_step(secret: &str, principal: &str, code: &str, now_ms: i64) -> Result<Option<i64>, FactorError> {
    let code = code.trim();
    if code.len() != DIGITS || !code.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(None);
    }
    let totp = totp(secret, principal)?;
    let now_step = now_ms.max(0) as u64 / 1000 / STEP_SECS;
    for step in [now_step, now_step.saturating_sub(1), now_step + 1] {
        if totp.check(code, step * STEP_SECS) {
            return Ok(Some(step as i64));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords() {
        assert!(matches!(hash_password("short"), Err(FactorError::PasswordTooShort)));
        let hash = hash_password("correct horse battery").unwrap();
        assert!(hash.starts_with("$argon2id$"));
        assert!(password_matches(Some(&hash), "correct horse battery"));
        assert!(!password_matches(Some(&hash), "correct horse batterY"));
        assert!(!password_matches(None, "decoy password, never matches"), "no hash never matches");
        assert!(!password_matches(Some("not a PHC string"), "x"));
    }

    #[test]
    fn codes_match_their_step_or_a_neighbour() {
        let secret = new_totp_secret();
        let now_ms = 1_700_000_000_000;
        let t = totp(&secret, "alice").unwrap();
        let step = now_ms / 1000 / 30;
        let code = t.generate((step * 30) as u64);
        assert_eq!(code_step(&secret, "alice", &code, now_ms).unwrap(), Some(step));
        let previous = t.generate(((step - 1) * 30) as u64);
        assert_eq!(code_step(&secret, "alice", &previous, now_ms).unwrap(), Some(step - 1));
        let stale = t.generate(((step - 3) * 30) as u64);
        assert_eq!(code_step(&secret, "alice", &stale, now_ms).unwrap(), None);
        assert_eq!(code_step(&secret, "alice", "12345", now_ms).unwrap(), None);
        assert_eq!(code_step(&secret, "alice", "abcdef", now_ms).unwrap(), None);
        assert!(enrollment_url(&secret, "alice").unwrap().starts_with("otpauth://totp/toolgate:alice?secret="));
    }
}

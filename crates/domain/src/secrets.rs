//! Random identifiers and secrets, and the hash a secret is stored as.

use base64::Engine as _;
use sha2::{Digest, Sha256};

/// `N` random bytes from the operating system.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf).expect("the operating system's random source works");
    buf
}

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
}

/// `N` random bytes, hex-encoded.
pub fn random_hex<const N: usize>() -> String {
    hex(&random_bytes::<N>())
}

/// 256 random bits, URL-safe base64, after `prefix`.
pub fn new_secret(prefix: &str) -> String {
    format!("{prefix}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random_bytes::<32>()))
}

/// Secrets are 256 random bits, so a fast hash is the right one (no salt, no stretching).
pub fn hash_secret(secret: &str) -> String {
    sha256_hex(secret)
}

/// The SHA-256 of a text, in lowercase hex (an export's digest, a secret's hash).
pub fn sha256_hex(text: &str) -> String {
    hex(&secret_digest(text))
}

/// The SHA-256 of a secret, as bytes (what [`hash_secret`] writes in hex).
pub fn secret_digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

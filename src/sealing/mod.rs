//! Envelope encryption (docs/secrets.md): each secret is encrypted with a data key of its own,
//! and that data key is wrapped by a version of the key-encryption key ([`keyring`]). Both
//! are XChaCha20-Poly1305 with random 24-byte nonces, stored in front of their ciphertexts.
//! The associated data binds a sealed value to what it is (a plugin secret's plugin, key and
//! version; later a CA's key): moved to another name, it does not open. Rotating the KEK
//! rewraps data keys only; the values are never decrypted for it.

pub mod keyring;
pub mod vault;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use keyring::Keyring;
use toolgate_domain::secrets::random_bytes;

const NONCE_BYTES: usize = 24;

/// A sealed value as it is stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sealed {
    /// The KEK version that wrapped its data key.
    pub kek_version: u32,
    /// Nonce then ciphertext of the data key.
    pub wrapped_key: Vec<u8>,
    /// Nonce then ciphertext of the value.
    pub ciphertext: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("KEK version {0} is not in the keyring: add it back to the key file (docs/secrets.md)")]
    MissingKek(u32),
    #[error("the sealed {0} does not open: it was altered, moved to another name, or wrapped by another key")]
    DoesNotOpen(&'static str),
}

fn encrypt(key: &[u8; 32], plaintext: &[u8], aad: &[u8]) -> Vec<u8> {
    let nonce = random_bytes::<NONCE_BYTES>();
    let cipher = XChaCha20Poly1305::new(key.into());
    let sealed = cipher
        .encrypt(XNonce::from_slice(&nonce), Payload { msg: plaintext, aad })
        .expect("XChaCha20-Poly1305 encrypts any length a secret may have");
    [nonce.as_slice(), &sealed].concat()
}

fn decrypt(key: &[u8; 32], sealed: &[u8], aad: &[u8], what: &'static str) -> Result<Vec<u8>, SealError> {
    if sealed.len() < NONCE_BYTES {
        return Err(SealError::DoesNotOpen(what));
    }
    let (nonce, body) = sealed.split_at(NONCE_BYTES);
    let cipher = XChaCha20Poly1305::new(key.into());
    cipher.decrypt(XNonce::from_slice(nonce), Payload { msg: body, aad }).map_err(|_| SealError::DoesNotOpen(what))
}

/// The wrapped key's associated data: the value's, and the KEK version.
fn key_context(context: &[u8], kek_version: u32) -> Vec<u8> {
    [context, b"\0kek-v", kek_version.to_string().as_bytes()].concat()
}

fn unwrap_key(ring: &Keyring, sealed: &Sealed, context: &[u8]) -> Result<[u8; 32], SealError> {
    let kek = ring.key(sealed.kek_version).ok_or(SealError::MissingKek(sealed.kek_version))?;
    let key = decrypt(kek, &sealed.wrapped_key, &key_context(context, sealed.kek_version), "data key")?;
    <[u8; 32]>::try_from(key.as_slice()).map_err(|_| SealError::DoesNotOpen("data key"))
}

/// Seals `plaintext` as `context` under KEK `version`.
pub fn seal(ring: &Keyring, version: u32, context: &[u8], plaintext: &[u8]) -> Result<Sealed, SealError> {
    let kek = ring.key(version).ok_or(SealError::MissingKek(version))?;
    let data_key = random_bytes::<32>();
    Ok(Sealed {
        kek_version: version,
        wrapped_key: encrypt(kek, &data_key, &key_context(context, version)),
        ciphertext: encrypt(&data_key, plaintext, context),
    })
}

/// The value `sealed` holds, if it is `context`'s.
pub fn open(ring: &Keyring, sealed: &Sealed, context: &[u8]) -> Result<Vec<u8>, SealError> {
    let data_key = unwrap_key(ring, sealed, context)?;
    decrypt(&data_key, &sealed.ciphertext, context, "value")
}

/// `sealed` with its data key wrapped by KEK `to` instead; the value is not touched.
pub fn rewrap(ring: &Keyring, sealed: &Sealed, context: &[u8], to: u32) -> Result<Sealed, SealError> {
    let data_key = unwrap_key(ring, sealed, context)?;
    let kek = ring.key(to).ok_or(SealError::MissingKek(to))?;
    Ok(Sealed {
        kek_version: to,
        wrapped_key: encrypt(kek, &data_key, &key_context(context, to)),
        ciphertext: sealed.ciphertext.clone(),
    })
}

/// A plugin secret's associated data: its plugin, key and version.
pub fn plugin_secret_context(plugin: &str, key: &str, version: u32) -> Vec<u8> {
    format!("toolgate plugin secret\0{plugin}\0{key}\0v{version}").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring() -> Keyring {
        Keyring::parse(&format!("{}\n{}\n", keyring::generate(1), keyring::generate(2)), "test").unwrap()
    }

    #[test]
    fn a_sealed_value_opens_only_as_itself() {
        let ring = ring();
        let here = plugin_secret_context("backup", "token", 1);
        let sealed = seal(&ring, 1, &here, b"s3cr3t").unwrap();
        assert!(!sealed.ciphertext.windows(6).any(|w| w == b"s3cr3t"));
        assert_eq!(open(&ring, &sealed, &here).unwrap(), b"s3cr3t");
        for elsewhere in [
            plugin_secret_context("backup", "other", 1),
            plugin_secret_context("other", "token", 1),
            plugin_secret_context("backup", "token", 2),
        ] {
            assert_eq!(open(&ring, &sealed, &elsewhere), Err(SealError::DoesNotOpen("data key")));
        }
        let mut altered = sealed.clone();
        *altered.ciphertext.last_mut().unwrap() ^= 1;
        assert_eq!(open(&ring, &altered, &here), Err(SealError::DoesNotOpen("value")));
        let claimed = Sealed { kek_version: 2, ..sealed.clone() };
        assert_eq!(open(&ring, &claimed, &here), Err(SealError::DoesNotOpen("data key")), "wrapped by another key");
        assert_eq!(open(&ring, &Sealed { kek_version: 9, ..sealed }, &here), Err(SealError::MissingKek(9)));
    }

    #[test]
    fn rewrapping_changes_the_wrap_not_the_value() {
        let ring = ring();
        let here = plugin_secret_context("backup", "token", 3);
        let sealed = seal(&ring, 1, &here, b"value").unwrap();
        let moved = rewrap(&ring, &sealed, &here, 2).unwrap();
        assert_eq!((moved.kek_version, &moved.ciphertext), (2, &sealed.ciphertext));
        assert_ne!(moved.wrapped_key, sealed.wrapped_key);
        assert_eq!(open(&ring, &moved, &here).unwrap(), b"value");
        let older = Keyring::parse(&keyring::generate(1), "old").unwrap();
        assert_eq!(open(&older, &moved, &here), Err(SealError::MissingKek(2)));
    }
}

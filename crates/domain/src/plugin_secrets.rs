//! Plugin secrets as stored (docs/secrets.md): write-only values, each sealed under a data key
//! wrapped by a version of the key-encryption key. Nothing here ever holds a value in the
//! clear; [`SecretMeta`] is everything any surface may show.

use serde::Serialize;

/// A sealed secret's row: its name, its version (each set makes a new one), the KEK version
/// that wraps its data key, and the two ciphertexts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretRow {
    pub plugin: String,
    pub key: String,
    pub version: u32,
    pub kek_version: u32,
    pub wrapped_key: Vec<u8>,
    pub ciphertext: Vec<u8>,
    pub updated_at: i64,
    pub updated_by: String,
}

/// What may be shown of a secret: never its value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SecretMeta {
    pub plugin: String,
    pub key: String,
    pub version: u32,
    pub kek_version: u32,
    pub updated_at: i64,
    pub updated_by: String,
}

impl SecretRow {
    pub fn meta(&self) -> SecretMeta {
        SecretMeta {
            plugin: self.plugin.clone(),
            key: self.key.clone(),
            version: self.version,
            kek_version: self.kek_version,
            updated_at: self.updated_at,
            updated_by: self.updated_by.clone(),
        }
    }
}

/// A KEK version the deployment activated: its fingerprint, never the key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KekVersion {
    pub version: u32,
    pub fingerprint: String,
    pub activated_at: i64,
    pub activated_by: String,
}

//! Plugin secrets and the KEK versions the deployment activated: the store's trait
//! (docs/secrets.md). The store keeps ciphertexts only; sealing and opening are the server's.
//! Writes are conditional on the version they replace, so two writers (or a rewrap racing a
//! new value) never overwrite each other unseen, and a rewrap never wraps a row twice.

use async_trait::async_trait;
use toolgate_domain::StoreError;
use toolgate_domain::plugin_secrets::{KekVersion, SecretMeta, SecretRow};

pub(crate) type Result<T> = std::result::Result<T, StoreError>;

#[async_trait]
pub trait SecretStore: Send + Sync {
    /// The secret, sealed, if it exists.
    async fn secret(&self, plugin: &str, key: &str) -> Result<Option<SecretRow>>;
    /// Stores `row` if the secret's current version is still `replacing` (None: it must not
    /// exist); false when another write came first.
    async fn put_secret(&self, row: &SecretRow, replacing: Option<u32>) -> Result<bool>;
    /// Deletes it; what it was.
    async fn delete_secret(&self, plugin: &str, key: &str) -> Result<Option<SecretMeta>>;
    /// Every secret (of `plugin`, when given), by plugin and key: names and versions only.
    async fn secrets(&self, plugin: Option<&str>) -> Result<Vec<SecretMeta>>;
    /// Up to `limit` secrets whose data keys a KEK older than `version` wraps.
    async fn wrapped_below(&self, version: u32, limit: usize) -> Result<Vec<SecretRow>>;
    /// Replaces a secret's wrap if it is still the same version under `from_kek`; false if
    /// it changed meanwhile (set again, deleted, or rewrapped by another run).
    async fn rewrap_secret(&self, row: &SecretRow, from_kek: u32) -> Result<bool>;
    /// Every KEK version activated, oldest first.
    async fn kek_versions(&self) -> Result<Vec<KekVersion>>;
    /// Records `version` as activated (the newest activated wraps new secrets); false when it
    /// was already.
    async fn activate_kek(&self, version: &KekVersion) -> Result<bool>;
}

/// The columns [`SecretRow`] is read from, in order.
pub(crate) const SECRET_COLUMNS: &str =
    "plugin, key, version, kek_version, wrapped_key, ciphertext, updated_at, updated_by";

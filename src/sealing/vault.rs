//! Plugin secrets, sealed (docs/secrets.md): the keyring this server was started with, checked
//! against the KEK versions the database activated, and every operation on secrets: set
//! (a new version, sealed under the newest activated KEK), open (for the agent that needs
//! it), delete, the KEK's status, its rotation and the rewrap of data keys.

use std::sync::{Arc, RwLock};

use serde::Serialize;
use toolgate_domain::StoreError;
use toolgate_domain::plugin_secrets::{KekVersion, SecretMeta, SecretRow};
use toolgate_store::SecretStore;

use super::keyring::Keyring;
use super::{SealError, Sealed, open, plugin_secret_context, rewrap, seal};

/// Where the keyring comes from.
#[derive(Clone, Debug)]
pub enum KeySource {
    /// `--kek-file`: read at start and again at each rotation.
    File(std::path::PathBuf),
    /// `TOOLGATE_KEK`: its text, as the process started with it.
    Variable(String),
    /// Neither: the secret tools are refused.
    Absent,
}

impl KeySource {
    fn load(&self) -> Result<Option<Keyring>, VaultError> {
        match self {
            KeySource::Absent => Ok(None),
            KeySource::Variable(text) => Keyring::parse(text, "TOOLGATE_KEK").map(Some).map_err(VaultError::Keyring),
            KeySource::File(path) => {
                let name = path.display().to_string();
                let text = std::fs::read_to_string(path)
                    .map_err(|e| VaultError::Keyring(format!("cannot read the key file {name}: {e}")))?;
                Keyring::parse(&text, &name).map(Some).map_err(VaultError::Keyring)
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    #[error(
        "this server has no key-encryption key, so it keeps no secrets: start it with --kek-file FILE or TOOLGATE_KEK (docs/secrets.md)"
    )]
    NoKek,
    #[error("{0}")]
    Keyring(String),
    #[error(
        "KEK version {0} in the keyring is not the key this database activated as version {0} (its fingerprint differs): every replica must be given the same key file"
    )]
    Mismatch(u32),
    #[error("the keyring lacks KEK version {0}, the newest this database activated: add it back to the key file")]
    ActiveMissing(u32),
    #[error(
        "the keyring's newest version is {newest}, and version {active} is active already: add a new version to the key file first (toolgate kek generate --version {next})"
    )]
    NothingToRotate { newest: u32, active: u32, next: u32 },
    #[error("{0}")]
    Seal(#[from] SealError),
    #[error("another write changed `{0}` at the same moment: try again")]
    Conflict(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What `get_kek_status` shows.
#[derive(Clone, Debug, Serialize)]
pub struct KekStatus {
    pub active_version: Option<u32>,
    pub keyring_versions: Vec<u32>,
    pub versions: Vec<VersionStatus>,
    /// Secrets whose data keys an older version than the active one wraps.
    pub awaiting_rewrap: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct VersionStatus {
    pub version: u32,
    pub fingerprint: Option<String>,
    pub activated_at: Option<i64>,
    pub in_keyring: bool,
    /// How many secrets' data keys it wraps now.
    pub secrets_wrapped: usize,
}

/// One run of `rewrap_secrets`.
#[derive(Clone, Debug, Serialize)]
pub struct RewrapRun {
    pub to_version: u32,
    pub rewrapped: usize,
    /// Rows that changed while this run read them (set again or deleted): left to the write
    /// that changed them, which sealed under the active version already.
    pub skipped_changed: usize,
    pub remaining: usize,
}

/// The plugin name under which the server keeps its own sealed keys (the agent CA's): no
/// manifest may declare it and no tool may write or delete it (plugin names start with a letter
/// or a digit), and KEK rotation rewraps them like every secret.
pub const INTERNAL: &str = "@toolgate";

pub struct Vault {
    source: KeySource,
    ring: RwLock<Option<Arc<Keyring>>>,
    store: Arc<dyn SecretStore>,
}

impl Vault {
    /// A vault without a keyring: every secret operation says how to give it one.
    pub fn absent(store: Arc<dyn SecretStore>) -> Self {
        Vault { source: KeySource::Absent, ring: RwLock::new(None), store }
    }

    /// Loads the keyring and checks it against the database; on a first start with a
    /// keyring, its newest version becomes the active one.
    pub async fn open(source: KeySource, store: Arc<dyn SecretStore>, now: i64) -> Result<Self, VaultError> {
        let ring = source.load()?;
        let vault = Vault { source, ring: RwLock::new(ring.map(Arc::new)), store };
        if let Ok(ring) = vault.ring() {
            let activated = vault.check(&ring).await?;
            if activated.is_empty() {
                let newest = ring.newest().expect("a parsed keyring holds a key");
                vault.activate(&ring, newest, "first start", now).await?;
            }
        }
        Ok(vault)
    }

    fn ring(&self) -> Result<Arc<Keyring>, VaultError> {
        self.ring.read().unwrap_or_else(|e| e.into_inner()).clone().ok_or(VaultError::NoKek)
    }

    /// Every activated version the keyring holds is the same key; the newest activated is in it.
    async fn check(&self, ring: &Keyring) -> Result<Vec<KekVersion>, VaultError> {
        let activated = self.store.kek_versions().await?;
        for v in &activated {
            if let Some(fingerprint) = ring.fingerprint(v.version)
                && fingerprint != v.fingerprint
            {
                return Err(VaultError::Mismatch(v.version));
            }
        }
        if let Some(active) = activated.last()
            && ring.fingerprint(active.version).is_none()
        {
            return Err(VaultError::ActiveMissing(active.version));
        }
        Ok(activated)
    }

    async fn activate(&self, ring: &Keyring, version: u32, by: &str, now: i64) -> Result<KekVersion, VaultError> {
        let record = KekVersion {
            version,
            fingerprint: ring.fingerprint(version).expect("the version is in the keyring"),
            activated_at: now,
            activated_by: by.to_string(),
        };
        self.store.activate_kek(&record).await?;
        Ok(record)
    }

    /// The version new secrets are sealed under: the newest activated.
    async fn active(&self) -> Result<(Arc<Keyring>, u32), VaultError> {
        let activated = self.store.kek_versions().await?;
        let active = activated.last().map(|v| v.version).ok_or(VaultError::NoKek)?;
        Ok((self.ring_with(active).await?, active))
    }

    /// The keyring, holding `version`: another replica may have activated a version this one
    /// has not read yet, so the key source is read again (and checked) before giving up.
    async fn ring_with(&self, version: u32) -> Result<Arc<Keyring>, VaultError> {
        let ring = self.ring()?;
        if ring.fingerprint(version).is_some() {
            return Ok(ring);
        }
        let fresh = Arc::new(self.source.load()?.ok_or(VaultError::NoKek)?);
        self.check(&fresh).await?;
        *self.ring.write().unwrap_or_else(|e| e.into_inner()) = Some(fresh.clone());
        Ok(fresh)
    }

    /// Stores a new version of the secret; what may be shown of it.
    pub async fn set(
        &self,
        plugin: &str,
        key: &str,
        value: &str,
        by: &str,
        now: i64,
    ) -> Result<SecretMeta, VaultError> {
        let (ring, active) = self.active().await?;
        let current = self.store.secret(plugin, key).await?;
        let version = current.as_ref().map_or(1, |c| c.version + 1);
        let sealed = seal(&ring, active, &plugin_secret_context(plugin, key, version), value.as_bytes())?;
        let row = SecretRow {
            plugin: plugin.to_string(),
            key: key.to_string(),
            version,
            kek_version: active,
            wrapped_key: sealed.wrapped_key,
            ciphertext: sealed.ciphertext,
            updated_at: now,
            updated_by: by.to_string(),
        };
        match self.store.put_secret(&row, current.map(|c| c.version)).await? {
            true => Ok(row.meta()),
            false => Err(VaultError::Conflict(format!("{plugin}/{key}"))),
        }
    }

    /// A secret's value, for the instruction that declares it (never for any surface).
    pub async fn reveal(&self, plugin: &str, key: &str) -> Result<Option<Vec<u8>>, VaultError> {
        let Some(row) = self.store.secret(plugin, key).await? else { return Ok(None) };
        let ring = self.ring_with(row.kek_version).await?;
        Ok(Some(open(&ring, &sealed(&row), &plugin_secret_context(&row.plugin, &row.key, row.version))?))
    }

    /// Seals `value` as the server's own secret `name` (under [`INTERNAL`]), unless one by
    /// that name exists (another replica made it first): false then, and it is kept.
    pub async fn put_internal(&self, name: &str, value: &str, now: i64) -> Result<bool, VaultError> {
        if self.store.secret(INTERNAL, name).await?.is_some() {
            return Ok(false);
        }
        match self.set(INTERNAL, name, value, "toolgate", now).await {
            Ok(_) => Ok(true),
            Err(VaultError::Conflict(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The server's own secret `name`, if it exists.
    pub async fn reveal_internal(&self, name: &str) -> Result<Option<String>, VaultError> {
        self.ring()?;
        let value = self.reveal(INTERNAL, name).await?;
        Ok(value.map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
    }

    pub async fn delete(&self, plugin: &str, key: &str) -> Result<Option<SecretMeta>, VaultError> {
        self.ring()?;
        Ok(self.store.delete_secret(plugin, key).await?)
    }

    pub async fn list(&self, plugin: Option<&str>) -> Result<Vec<SecretMeta>, VaultError> {
        Ok(self.store.secrets(plugin).await?)
    }

    pub async fn status(&self) -> Result<KekStatus, VaultError> {
        let ring = self.ring.read().unwrap_or_else(|e| e.into_inner()).clone();
        let activated = self.store.kek_versions().await?;
        let secrets = self.store.secrets(None).await?;
        let active = activated.last().map(|v| v.version);
        let mut numbers: Vec<u32> = activated.iter().map(|v| v.version).collect();
        numbers.extend(secrets.iter().map(|s| s.kek_version));
        numbers.extend(ring.iter().flat_map(|r| r.versions()));
        numbers.sort_unstable();
        numbers.dedup();
        let versions = numbers
            .into_iter()
            .map(|version| {
                let record = activated.iter().find(|v| v.version == version);
                VersionStatus {
                    version,
                    fingerprint: record.map(|r| r.fingerprint.clone()),
                    activated_at: record.map(|r| r.activated_at),
                    in_keyring: ring.as_ref().is_some_and(|r| r.fingerprint(version).is_some()),
                    secrets_wrapped: secrets.iter().filter(|s| s.kek_version == version).count(),
                }
            })
            .collect();
        let awaiting_rewrap = active.map_or(0, |a| secrets.iter().filter(|s| s.kek_version < a).count());
        let keyring_versions = ring.map(|r| r.versions()).unwrap_or_default();
        Ok(KekStatus { active_version: active, keyring_versions, versions, awaiting_rewrap })
    }

    /// Reads the key source again and activates its newest version, once checked against
    /// what the database activated before. New secrets are sealed under it from now on;
    /// existing ones move with [`Vault::rewrap`].
    pub async fn rotate(&self, by: &str, now: i64) -> Result<KekVersion, VaultError> {
        let ring = Arc::new(self.source.load()?.ok_or(VaultError::NoKek)?);
        let activated = self.check(&ring).await?;
        let active = activated.last().map_or(0, |v| v.version);
        let newest = ring.newest().expect("a parsed keyring holds a key");
        if newest <= active {
            return Err(VaultError::NothingToRotate { newest, active, next: active + 1 });
        }
        *self.ring.write().unwrap_or_else(|e| e.into_inner()) = Some(ring.clone());
        self.activate(&ring, newest, by, now).await
    }

    /// Rewraps up to `limit` data keys under the active version, `batch` rows per read. Each
    /// row is one conditional write: a run stopped anywhere (even by kill -9) leaves every row
    /// whole, under the old wrap or the new, and the next run goes on from there.
    pub async fn rewrap(&self, batch: usize, limit: usize) -> Result<RewrapRun, VaultError> {
        let (ring, active) = self.active().await?;
        let (mut rewrapped, mut skipped_changed) = (0, 0);
        while rewrapped + skipped_changed < limit {
            let rows = self.store.wrapped_below(active, batch.min(limit - rewrapped - skipped_changed)).await?;
            if rows.is_empty() {
                break;
            }
            for row in rows {
                let context = plugin_secret_context(&row.plugin, &row.key, row.version);
                let moved = rewrap(&ring, &sealed(&row), &context, active)?;
                let new = SecretRow { kek_version: active, wrapped_key: moved.wrapped_key, ..row.clone() };
                match self.store.rewrap_secret(&new, row.kek_version).await? {
                    true => rewrapped += 1,
                    false => skipped_changed += 1,
                }
            }
        }
        let remaining = self.store.secrets(None).await?.iter().filter(|s| s.kek_version < active).count();
        Ok(RewrapRun { to_version: active, rewrapped, skipped_changed, remaining })
    }

    /// Opens every secret (`toolgate secret check`): how many open, and the names of those
    /// that do not, with why.
    pub async fn check_all(&self) -> Result<(usize, Vec<(String, String)>), VaultError> {
        let ring = self.ring()?;
        let (mut opened, mut failed) = (0, Vec::new());
        for meta in self.store.secrets(None).await? {
            let Some(row) = self.store.secret(&meta.plugin, &meta.key).await? else { continue };
            match open(&ring, &sealed(&row), &plugin_secret_context(&row.plugin, &row.key, row.version)) {
                Ok(_) => opened += 1,
                Err(e) => failed.push((format!("{}/{}", row.plugin, row.key), e.to_string())),
            }
        }
        Ok((opened, failed))
    }
}

/// The fleet hub values the secrets a run's steps name from here, as it sends the run.
impl toolgate_fleet::SecretSource for Vault {
    fn reveal<'a>(
        &'a self,
        plugin: &'a str,
        key: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Option<String>, String>> + Send + 'a>> {
        Box::pin(async move {
            match Vault::reveal(self, plugin, key).await {
                Ok(Some(bytes)) => String::from_utf8(bytes).map(Some).map_err(|_| "it is not text".to_string()),
                Ok(None) => Ok(None),
                Err(e) => Err(e.to_string()),
            }
        })
    }
}

fn sealed(row: &SecretRow) -> Sealed {
    Sealed { kek_version: row.kek_version, wrapped_key: row.wrapped_key.clone(), ciphertext: row.ciphertext.clone() }
}

#[cfg(test)]
mod tests {
    use toolgate_store::SqliteStore;

    use super::*;

    #[tokio::test]
    async fn a_row_copied_to_another_name_does_not_open() {
        let store = SqliteStore::open_in_memory().unwrap().repositories().secrets;
        let source = KeySource::Variable(crate::sealing::keyring::generate(1));
        let vault = Vault::open(source, store.clone(), 10).await.unwrap();
        vault.set("backup", "token", "s3cr3t", "admin", 11).await.unwrap();
        assert_eq!(vault.reveal("backup", "token").await.unwrap().unwrap(), b"s3cr3t");
        let row = store.secret("backup", "token").await.unwrap().unwrap();
        let copied = SecretRow { key: "stolen".into(), ..row };
        assert!(store.put_secret(&copied, None).await.unwrap());
        assert!(matches!(vault.reveal("backup", "stolen").await, Err(VaultError::Seal(SealError::DoesNotOpen(_)))));
        let (opened, failed) = vault.check_all().await.unwrap();
        assert_eq!((opened, failed.len()), (1, 1));
        assert!(failed[0].0 == "backup/stolen" && failed[0].1.contains("moved to another name"), "{failed:?}");
    }

    #[tokio::test]
    async fn a_replica_reads_its_key_file_again_for_a_version_another_activated() {
        let store = SqliteStore::open_in_memory().unwrap().repositories().secrets;
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
        let first = crate::sealing::keyring::generate(1);
        std::fs::write(&a, &first).unwrap();
        std::fs::write(&b, &first).unwrap();
        let one = Vault::open(KeySource::File(a.clone()), store.clone(), 1).await.unwrap();
        let other = Vault::open(KeySource::File(b.clone()), store.clone(), 1).await.unwrap();
        // The operator adds version 2 to both files; one replica rotates.
        let both = format!("{first}\n{}\n", crate::sealing::keyring::generate(2));
        std::fs::write(&a, &both).unwrap();
        std::fs::write(&b, &both).unwrap();
        assert_eq!(one.rotate("admin", 2).await.unwrap().version, 2);
        let set = other.set("p", "k", "v", "admin", 3).await.unwrap();
        assert_eq!(set.kek_version, 2, "the other replica read its file again for version 2");
        assert_eq!(one.reveal("p", "k").await.unwrap().unwrap(), b"v");
        // A replica whose file lacks the version says so.
        std::fs::write(&b, &first).unwrap();
        let stale = Vault::open(KeySource::File(b.clone()), store.clone(), 4).await;
        assert!(matches!(stale, Err(VaultError::ActiveMissing(2))));
    }
}

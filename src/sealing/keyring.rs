//! The key-encryption keys (docs/secrets.md): numbered versions of 32 random bytes, from a key
//! file (`--kek-file`) or the `TOOLGATE_KEK` variable, the same on every replica and never in
//! the database. One entry per line, `VERSION:BASE64`, `#` comments; `toolgate kek generate`
//! prints one. The database records which versions were activated with a fingerprint of each,
//! so a replica started with another key is refused before it wraps anything.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};

/// A key-encryption key's length, in bytes.
pub const KEY_BYTES: usize = 32;

/// The versions a keyring holds; the keys themselves never leave this module but to seal.
#[derive(Clone, Default)]
pub struct Keyring {
    keys: BTreeMap<u32, [u8; KEY_BYTES]>,
    /// Where it was read from, for messages (never the keys).
    pub source: String,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring").field("versions", &self.versions()).field("source", &self.source).finish()
    }
}

impl Keyring {
    /// Reads a keyring's text; every problem at `SOURCE:LINE`.
    pub fn parse(text: &str, source: &str) -> Result<Keyring, String> {
        let mut keys = BTreeMap::new();
        let mut problems = Vec::new();
        // The variable may hold its entries on one line, separated by spaces or commas.
        let entries = text.lines().enumerate().flat_map(|(i, line)| {
            let line = line.split('#').next().unwrap_or_default();
            line.split([',', ' ', '\t'])
                .filter(|e| !e.is_empty())
                .map(move |e| (i + 1, e.to_string()))
                .collect::<Vec<_>>()
        });
        for (line, entry) in entries {
            let at = format!("{source}:{line}");
            let Some((version, key)) = entry.split_once(':') else {
                problems.push(format!(
                    "{at}: `{}…` is not VERSION:BASE64 (toolgate kek generate prints one)",
                    prefix(&entry)
                ));
                continue;
            };
            let version: u32 = match version.parse() {
                Ok(v) if v > 0 => v,
                _ => {
                    problems.push(format!("{at}: version `{version}` is not a positive whole number"));
                    continue;
                }
            };
            match STANDARD.decode(key.trim()).map(<[u8; KEY_BYTES]>::try_from) {
                Ok(Ok(bytes)) => {
                    if keys.insert(version, bytes).is_some() {
                        problems.push(format!("{at}: version {version} is given twice"));
                    }
                }
                Ok(Err(bytes)) => {
                    problems.push(format!("{at}: version {version} is {} bytes, not {KEY_BYTES}", bytes.len()))
                }
                Err(e) => problems.push(format!("{at}: version {version} is not base64: {e}")),
            }
        }
        if !problems.is_empty() {
            return Err(problems.join("\n"));
        }
        if keys.is_empty() {
            return Err(format!("{source} holds no key (toolgate kek generate --version 1 prints one)"));
        }
        Ok(Keyring { keys, source: source.to_string() })
    }

    pub fn versions(&self) -> Vec<u32> {
        self.keys.keys().copied().collect()
    }

    pub fn newest(&self) -> Option<u32> {
        self.keys.keys().next_back().copied()
    }

    pub(super) fn key(&self, version: u32) -> Option<&[u8; KEY_BYTES]> {
        self.keys.get(&version)
    }

    /// What the database keeps to recognise a version: a digest that reveals nothing of it.
    pub fn fingerprint(&self, version: u32) -> Option<String> {
        let key = self.keys.get(&version)?;
        let digest = Sha256::new().chain_update(b"toolgate kek fingerprint v1\0").chain_update(key).finalize();
        Some(toolgate_domain::secrets::hex(&digest[..16]))
    }
}

fn prefix(entry: &str) -> String {
    entry.chars().take(8).collect()
}

/// A new entry for version `version`: 32 bytes from the operating system.
pub fn generate(version: u32) -> String {
    format!("{version}:{}", STANDARD.encode(toolgate_domain::secrets::random_bytes::<KEY_BYTES>()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_read_with_every_problem_at_its_line() {
        let text = format!("# keys\n{}\n\n{}  # the newest\n", generate(1), generate(2));
        let ring = Keyring::parse(&text, "kek.txt").unwrap();
        assert_eq!((ring.versions(), ring.newest()), (vec![1, 2], Some(2)));
        assert_ne!(ring.fingerprint(1), ring.fingerprint(2));
        assert_eq!(ring.fingerprint(1).unwrap().len(), 32);
        assert!(!format!("{ring:?}").contains(&text[7..20]), "Debug never shows a key");
        let one_line = format!("{}, {}", generate(3), generate(4));
        assert_eq!(Keyring::parse(&one_line, "TOOLGATE_KEK").unwrap().versions(), vec![3, 4]);
        let bad =
            format!("nonsense\n0:{}\n2:AAAA\n5:!!\n{}\n{}\n", STANDARD.encode([0u8; 32]), generate(7), generate(7));
        let problems = Keyring::parse(&bad, "kek.txt").unwrap_err();
        for expected in [
            "kek.txt:1: `nonsense…` is not VERSION:BASE64",
            "kek.txt:2: version `0` is not a positive whole number",
            "kek.txt:3: version 2 is 3 bytes, not 32",
            "kek.txt:4: version 5 is not base64",
            "kek.txt:6: version 7 is given twice",
        ] {
            assert!(problems.contains(expected), "{expected}\n{problems}");
        }
        assert!(Keyring::parse("# nothing\n", "kek.txt").unwrap_err().contains("holds no key"));
    }
}

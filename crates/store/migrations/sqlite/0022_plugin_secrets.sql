-- Plugin secrets (docs/secrets.md): sealed values only, each with its version and the KEK
-- version wrapping its data key; and the KEK versions the deployment activated, by
-- fingerprint (never the key).
CREATE TABLE plugin_secret (
    plugin TEXT NOT NULL,
    key TEXT NOT NULL,
    version INTEGER NOT NULL,
    kek_version INTEGER NOT NULL,
    wrapped_key BLOB NOT NULL,
    ciphertext BLOB NOT NULL,
    updated_at INTEGER NOT NULL,
    updated_by TEXT NOT NULL,
    PRIMARY KEY (plugin, key)
);
CREATE INDEX plugin_secret_by_kek ON plugin_secret (kek_version);
CREATE TABLE kek_version (
    version INTEGER PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    activated_at INTEGER NOT NULL,
    activated_by TEXT NOT NULL
);

-- Upload grants (docs/uploads.md): who may send which file back, once; and what came, kept
-- content-addressed by SHA-256 in chunks stored under the attempt that wrote them.
CREATE TABLE upload_grant (
    grant_id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    source_path TEXT,
    expected_sha256 TEXT,
    retention_class TEXT NOT NULL,
    retention_secs INTEGER NOT NULL,
    max_bytes INTEGER NOT NULL,
    created_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    created_by TEXT NOT NULL,
    state TEXT NOT NULL,
    attempt TEXT,
    claimed_at_ms INTEGER,
    finished_at_ms INTEGER,
    uploaded_path TEXT,
    kind TEXT,
    sha256 TEXT,
    size_bytes INTEGER,
    failure TEXT,
    revoked_at_ms INTEGER,
    revoked_by TEXT,
    preview TEXT
);
CREATE INDEX upload_grant_by_agent ON upload_grant (agent_id, created_at_ms);
CREATE INDEX upload_grant_by_content ON upload_grant (sha256);
CREATE TABLE upload_content (
    sha256 TEXT PRIMARY KEY,
    size_bytes INTEGER NOT NULL,
    attempt TEXT NOT NULL,
    chunks INTEGER NOT NULL,
    stored_at_ms INTEGER NOT NULL
);
CREATE TABLE upload_chunk (
    attempt TEXT NOT NULL,
    seq INTEGER NOT NULL,
    bytes BLOB NOT NULL,
    PRIMARY KEY (attempt, seq)
);

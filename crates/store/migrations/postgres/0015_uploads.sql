-- Upload grants (docs/uploads.md): who may send which file back, once; and what came, kept
-- content-addressed by SHA-256 in chunks stored under the attempt that wrote them.
CREATE TABLE upload_grant (
    grant_id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    source_path TEXT,
    expected_sha256 TEXT,
    retention_class TEXT NOT NULL,
    retention_secs BIGINT NOT NULL,
    max_bytes BIGINT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    state TEXT NOT NULL,
    attempt TEXT,
    claimed_at_ms BIGINT,
    finished_at_ms BIGINT,
    uploaded_path TEXT,
    kind TEXT,
    sha256 TEXT,
    size_bytes BIGINT,
    failure TEXT,
    revoked_at_ms BIGINT,
    revoked_by TEXT,
    preview TEXT
);
CREATE INDEX upload_grant_by_agent ON upload_grant (agent_id, created_at_ms);
CREATE INDEX upload_grant_by_content ON upload_grant (sha256);
CREATE TABLE upload_content (
    sha256 TEXT PRIMARY KEY,
    size_bytes BIGINT NOT NULL,
    attempt TEXT NOT NULL,
    chunks BIGINT NOT NULL,
    stored_at_ms BIGINT NOT NULL
);
CREATE TABLE upload_chunk (
    attempt TEXT NOT NULL,
    seq BIGINT NOT NULL,
    bytes BYTEA NOT NULL,
    PRIMARY KEY (attempt, seq)
);

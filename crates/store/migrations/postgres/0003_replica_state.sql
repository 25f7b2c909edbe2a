-- What replicas of one deployment share besides the records: secrets made once (the HMAC key
-- of 2026-07-28 request states), single-use marks (a request state's nonce), and the
-- handshake-era MCP sessions, so that a session made on one replica is good on every one.
CREATE TABLE shared_secret (
    name TEXT PRIMARY KEY,
    value BYTEA NOT NULL
);
CREATE TABLE single_use (
    key TEXT PRIMARY KEY,
    expires_at BIGINT NOT NULL
);
CREATE INDEX single_use_by_expiry ON single_use (expires_at);
CREATE TABLE mcp_session (
    id TEXT PRIMARY KEY,
    principal TEXT NOT NULL,
    version TEXT NOT NULL,
    client_capabilities TEXT NOT NULL,
    last_seen_ms BIGINT NOT NULL,
    replica TEXT NOT NULL
);
CREATE INDEX mcp_session_by_last_seen ON mcp_session (last_seen_ms);

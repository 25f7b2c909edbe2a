-- Principals and their API tokens (stored hashed, never in clear).
CREATE TABLE principal (
    name TEXT PRIMARY KEY,
    roles TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE api_token (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    principal TEXT NOT NULL,
    tier TEXT,
    secret_hash TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    revoked_at INTEGER
);

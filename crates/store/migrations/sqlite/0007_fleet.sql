-- The fleet: enrollment tokens, agents (their credential as a hash, their host's facts as
-- JSON) and the inventory tables they report, one row per inventory row.
CREATE TABLE enrollment_token (
    id TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL UNIQUE,
    created_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    uses_allowed INTEGER NOT NULL,
    uses INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE agent (
    agent_id TEXT PRIMARY KEY,
    credential_hash TEXT NOT NULL,
    enrolled_at_ms INTEGER NOT NULL,
    enrolled_with TEXT NOT NULL,
    last_seen_ms INTEGER,
    revoked_at_ms INTEGER,
    facts TEXT,
    facts_at_ms INTEGER
);
CREATE INDEX agent_by_revocation ON agent (revoked_at_ms) WHERE revoked_at_ms IS NOT NULL;

CREATE TABLE inventory_table (
    agent_id TEXT NOT NULL,
    table_name TEXT NOT NULL,
    collected_at_ms INTEGER NOT NULL,
    received_at_ms INTEGER NOT NULL,
    available INTEGER NOT NULL,
    reason TEXT,
    row_count INTEGER NOT NULL,
    PRIMARY KEY (agent_id, table_name)
);

CREATE TABLE inventory_row (
    table_name TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    row TEXT NOT NULL
);
CREATE INDEX inventory_row_by_table ON inventory_row (table_name, agent_id);

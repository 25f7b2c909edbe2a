-- toolgate's schema on PostgreSQL, version 1: the same tables as SQLite's ten migrations
-- (see migrations/sqlite/), in PostgreSQL's types: BIGINT times, BOOLEAN flags, JSONB rows.

CREATE TABLE plugin_config (
    plugin TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    updated_by TEXT NOT NULL,
    PRIMARY KEY (plugin, key)
);
CREATE TABLE plugin_kill_switch (
    plugin TEXT NOT NULL,
    action TEXT NOT NULL DEFAULT '',
    engaged BOOLEAN NOT NULL,
    reason TEXT,
    updated_at BIGINT NOT NULL,
    updated_by TEXT NOT NULL,
    PRIMARY KEY (plugin, action)
);
CREATE TABLE agent_tag (
    agent_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    updated_by TEXT NOT NULL,
    PRIMARY KEY (agent_id, key)
);

-- Principals and their API tokens (stored hashed, never in clear).
CREATE TABLE principal (
    name TEXT PRIMARY KEY,
    roles TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE TABLE api_token (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    principal TEXT NOT NULL,
    tier TEXT,
    secret_hash TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    revoked_at BIGINT,
    rotated_from TEXT
);
CREATE TABLE principal_sign_in (
    principal TEXT PRIMARY KEY,
    password_hash TEXT,
    totp_secret TEXT,
    totp_confirmed_at_ms BIGINT,
    last_totp_step BIGINT,
    failed_attempts BIGINT NOT NULL DEFAULT 0,
    locked_until_ms BIGINT NOT NULL DEFAULT 0
);

-- Human approvals: one pending ticket per submitter, definition and arguments.
CREATE TABLE approval (
    id TEXT PRIMARY KEY,
    definition TEXT NOT NULL,
    tool TEXT NOT NULL,
    surface TEXT NOT NULL,
    submitter TEXT NOT NULL,
    canonical_args TEXT NOT NULL,
    sensitive_digest TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'consumed')),
    submitted_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    reviewer TEXT,
    reviewed_at BIGINT,
    review_comment TEXT,
    consumed_at BIGINT
);
CREATE UNIQUE INDEX approval_pending_once
    ON approval (submitter, definition, canonical_args, sensitive_digest) WHERE status = 'pending';
CREATE INDEX approval_by_status ON approval (status, submitter);

-- The audit log of every replica; `replica` names the server that wrote the row.
CREATE TABLE audit (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    principal TEXT,
    token_id TEXT,
    action TEXT NOT NULL,
    target TEXT,
    result TEXT NOT NULL,
    detail TEXT,
    correlation_id TEXT,
    replica TEXT
);
CREATE INDEX audit_by_time ON audit (at_ms);
CREATE INDEX audit_by_correlation ON audit (correlation_id);

CREATE TABLE management_group (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
INSERT INTO management_group (id, name, description, created_at)
    VALUES ('all', 'All agents', 'Every enrolled agent; the group every scope starts from.', 0);

CREATE TABLE readiness (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    checked_at_ms BIGINT NOT NULL
);

-- The fleet.
CREATE TABLE enrollment_token (
    id TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL UNIQUE,
    created_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    uses_allowed BIGINT NOT NULL,
    uses BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE agent (
    agent_id TEXT PRIMARY KEY,
    credential_hash TEXT NOT NULL,
    enrolled_at_ms BIGINT NOT NULL,
    enrolled_with TEXT NOT NULL,
    last_seen_ms BIGINT,
    revoked_at_ms BIGINT,
    facts TEXT,
    facts_at_ms BIGINT,
    quarantine_wanted BOOLEAN NOT NULL DEFAULT false,
    quarantine_reason TEXT,
    quarantine_reported BOOLEAN
);
CREATE INDEX agent_by_revocation ON agent (revoked_at_ms) WHERE revoked_at_ms IS NOT NULL;

CREATE TABLE inventory_table (
    agent_id TEXT NOT NULL,
    table_name TEXT NOT NULL,
    collected_at_ms BIGINT NOT NULL,
    received_at_ms BIGINT NOT NULL,
    available BOOLEAN NOT NULL,
    reason TEXT,
    row_count BIGINT NOT NULL,
    PRIMARY KEY (agent_id, table_name)
);
-- `id` keeps the order an agent reported its rows in (SQLite's rowid).
CREATE TABLE inventory_row (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    table_name TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    row JSONB NOT NULL
);
CREATE INDEX inventory_row_by_table ON inventory_row (table_name, agent_id, id);
-- Equality on a name or a port reads the matching rows only (as 0008 does for SQLite).
CREATE INDEX inventory_row_by_name ON inventory_row (table_name, (row -> 'name'), agent_id);
CREATE INDEX inventory_row_by_port ON inventory_row (table_name, (row -> 'port'), agent_id);

-- Executions: committed before anything is sent; responses are JSONB rows per step.
CREATE TABLE execution (
    execution_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    steps TEXT NOT NULL,
    scope TEXT,
    requested_by TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    deadline_ms BIGINT NOT NULL,
    cancelled_at_ms BIGINT
);
CREATE INDEX execution_by_time ON execution (created_at_ms);
CREATE TABLE execution_target (
    execution_id TEXT NOT NULL REFERENCES execution (execution_id),
    agent_id TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (execution_id, agent_id)
);
CREATE INDEX execution_target_unfinished ON execution_target (agent_id, execution_id)
    WHERE status IN ('pending', 'running');
CREATE TABLE execution_step (
    execution_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    step BIGINT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    row_count BIGINT NOT NULL,
    PRIMARY KEY (execution_id, agent_id, step)
);
CREATE TABLE response (
    execution_id TEXT NOT NULL,
    step BIGINT NOT NULL,
    agent_id TEXT NOT NULL,
    row_index BIGINT NOT NULL,
    row JSONB NOT NULL,
    PRIMARY KEY (execution_id, step, agent_id, row_index)
);
CREATE TABLE compliance_result (
    agent_id TEXT NOT NULL,
    rule_id TEXT NOT NULL,
    status TEXT NOT NULL,
    evidence TEXT NOT NULL,
    evaluated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (rule_id, agent_id)
);

-- Human approvals, the audit log, management groups, token rotation.
CREATE TABLE approval (
    id TEXT PRIMARY KEY,
    definition TEXT NOT NULL,
    tool TEXT NOT NULL,
    surface TEXT NOT NULL,
    submitter TEXT NOT NULL,
    canonical_args TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'consumed')),
    submitted_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    reviewer TEXT,
    reviewed_at INTEGER,
    review_comment TEXT,
    consumed_at INTEGER
);
CREATE UNIQUE INDEX approval_pending_once ON approval (submitter, definition, canonical_args) WHERE status = 'pending';
CREATE INDEX approval_by_status ON approval (status, submitter);
CREATE TABLE audit (
    id INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL,
    principal TEXT,
    token_id TEXT,
    action TEXT NOT NULL,
    target TEXT,
    result TEXT NOT NULL,
    detail TEXT,
    correlation_id TEXT
);
CREATE INDEX audit_by_time ON audit (at_ms);
CREATE INDEX audit_by_correlation ON audit (correlation_id);
CREATE TABLE management_group (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
INSERT INTO management_group (id, name, description, created_at)
    VALUES ('all', 'All agents', 'Every enrolled agent; the group every scope starts from.', 0);
ALTER TABLE api_token ADD COLUMN rotated_from TEXT;

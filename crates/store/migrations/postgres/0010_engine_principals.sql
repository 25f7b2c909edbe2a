-- Engine principals (docs/identities.md): a principal of kind `engine`, with the person who
-- owns it, why it exists, and its quota where it differs from policy.yaml's defaults.
ALTER TABLE principal ADD COLUMN kind TEXT NOT NULL DEFAULT 'person';
CREATE TABLE engine_principal (
    principal_id TEXT PRIMARY KEY,
    display_name TEXT NOT NULL,
    owner TEXT NOT NULL,
    justification TEXT NOT NULL,
    classification TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    revoked_at BIGINT,
    revoke_reason TEXT,
    superseded_by TEXT,
    requests_per_minute INTEGER,
    concurrent_requests INTEGER
);
CREATE INDEX engine_principal_by_owner ON engine_principal (owner);
-- How a credential rotation ended, on the successor's row (`rotated_from` names the
-- predecessor): confirmed, or expired when the overlap ran out first. NULL while pending.
ALTER TABLE api_token ADD COLUMN rotation_resolution TEXT;
ALTER TABLE api_token ADD COLUMN rotation_resolved_at BIGINT;

-- Access reviews (docs/identities.md): a campaign, and every grant it snapshotted at opening
-- with the decision on it and when closing applied a flag.
CREATE TABLE access_review (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    opened_by TEXT NOT NULL,
    opened_at INTEGER NOT NULL,
    closed_by TEXT,
    closed_at INTEGER
);
CREATE TABLE access_review_grant (
    campaign_id TEXT NOT NULL,
    principal_type TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    role_name TEXT NOT NULL,
    group_id TEXT NOT NULL DEFAULT '',
    holder TEXT NOT NULL,
    decision TEXT,
    justification TEXT,
    decided_by TEXT,
    decided_at INTEGER,
    applied_at INTEGER,
    PRIMARY KEY (campaign_id, principal_type, principal_id, role_name, group_id)
);

-- Management groups as a tree, their members and the roles principals hold on them (issue 30).
-- A group's agents are its members and its descendants' members; the root ('all') holds every
-- agent and has no member rows. A member row says how the agent came in: by id (explicit), by
-- the group's rule (by_rule), or both; it goes when neither holds any more.
ALTER TABLE management_group ADD COLUMN parent_id TEXT;
ALTER TABLE management_group ADD COLUMN rule TEXT;
ALTER TABLE management_group ADD COLUMN updated_at INTEGER NOT NULL DEFAULT 0;
UPDATE management_group SET updated_at = created_at;
CREATE UNIQUE INDEX management_group_by_name ON management_group (lower(name));
CREATE INDEX management_group_by_parent ON management_group (parent_id);

CREATE TABLE group_member (
    group_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    explicit BOOLEAN NOT NULL DEFAULT FALSE,
    by_rule BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (group_id, agent_id)
);
CREATE INDEX group_member_by_agent ON group_member (agent_id, group_id);

CREATE TABLE group_role (
    principal TEXT NOT NULL,
    group_id TEXT NOT NULL,
    role TEXT NOT NULL,
    granted_at INTEGER NOT NULL,
    granted_by TEXT NOT NULL,
    PRIMARY KEY (principal, group_id, role)
);
CREATE INDEX group_role_by_group ON group_role (group_id);

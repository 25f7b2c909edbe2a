-- Tags on agents: one value per (agent, key).
CREATE TABLE agent_tag (
    agent_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    updated_by TEXT NOT NULL,
    PRIMARY KEY (agent_id, key)
);

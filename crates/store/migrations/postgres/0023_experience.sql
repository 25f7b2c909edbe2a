-- The endpoint experience agents measure (docs/experience.md): one row per agent, metric and
-- sample time, so a batch sent again is kept once.
CREATE TABLE experience_sample (
    agent_id TEXT NOT NULL,
    metric TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    value DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (agent_id, metric, at_ms)
);

-- What each agent's newest report said of its device.
CREATE TABLE experience_device (
    agent_id TEXT PRIMARY KEY,
    measured TEXT NOT NULL,
    absent TEXT NOT NULL,
    fullest_filesystem TEXT,
    last_sample_ms BIGINT NOT NULL,
    received_at_ms BIGINT NOT NULL
);

-- Executions are rows first, then messages: an execution and one target row per agent are
-- committed before anything is sent, so a restart or a dropped client loses nothing and an
-- agent that reconnects is sent what is still due. Responses are rows of JSON, per step.
CREATE TABLE execution (
    execution_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,              -- instruction | bundle
    steps TEXT NOT NULL,             -- JSON: the run steps sent to agents
    scope TEXT,                      -- the scope that chose the targets, if one did
    requested_by TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    deadline_ms INTEGER NOT NULL,
    cancelled_at_ms INTEGER
);
CREATE INDEX execution_by_time ON execution (created_at_ms);

CREATE TABLE execution_target (
    execution_id TEXT NOT NULL REFERENCES execution (execution_id),
    agent_id TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    updated_at_ms INTEGER NOT NULL,
    PRIMARY KEY (execution_id, agent_id)
) WITHOUT ROWID;
-- What is due for an agent when it connects, and what the deadline sweep looks at.
CREATE INDEX execution_target_unfinished ON execution_target (agent_id, execution_id)
    WHERE status IN ('pending', 'running');

CREATE TABLE execution_step (
    execution_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    row_count INTEGER NOT NULL,
    PRIMARY KEY (execution_id, agent_id, step)
) WITHOUT ROWID;

CREATE TABLE response (
    execution_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    agent_id TEXT NOT NULL,
    row_index INTEGER NOT NULL,
    row TEXT NOT NULL,
    PRIMARY KEY (execution_id, step, agent_id, row_index)
) WITHOUT ROWID;

-- Quarantine: what the server wants, and what the agent last said it is in.
ALTER TABLE agent ADD COLUMN quarantine_wanted INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent ADD COLUMN quarantine_reason TEXT;
ALTER TABLE agent ADD COLUMN quarantine_reported INTEGER;

CREATE TABLE compliance_result (
    agent_id TEXT NOT NULL,
    rule_id TEXT NOT NULL,
    status TEXT NOT NULL,
    evidence TEXT NOT NULL,
    evaluated_at_ms INTEGER NOT NULL,
    PRIMARY KEY (rule_id, agent_id)
) WITHOUT ROWID;

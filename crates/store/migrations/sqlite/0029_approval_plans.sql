-- The plan a held change started when its ticket was minted (an execution of plan steps), and
-- the plans a person approved: each agent's plan digest, as JSON, set before the approval.
CREATE TABLE approval_plan (
    approval_id TEXT PRIMARY KEY,
    execution_id TEXT NOT NULL,
    approved TEXT
);

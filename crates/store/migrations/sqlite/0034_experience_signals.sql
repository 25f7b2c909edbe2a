-- Occurrences of experience signals (docs/experience.md, experience.yaml): one row from the
-- first sample that made a signal fire to the first that did not (ended_ms null while it holds).
CREATE TABLE experience_signal (
    agent_id TEXT NOT NULL,
    signal TEXT NOT NULL,
    started_ms INTEGER NOT NULL,
    last_ms INTEGER NOT NULL,
    ended_ms INTEGER,
    peak REAL NOT NULL,
    PRIMARY KEY (agent_id, signal, started_ms)
) WITHOUT ROWID;
CREATE INDEX experience_signal_by_time ON experience_signal (last_ms);

-- The per-program experience series (docs/experience.md): per agent, program (process name),
-- metric (exits, crashes, oom_kills) and sample time, only for programs a sample counted; and
-- their hourly and daily rollups, kept like the device's (experience_rollup).
CREATE TABLE experience_app_sample (
    agent_id TEXT NOT NULL,
    app TEXT NOT NULL,
    metric TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    value REAL NOT NULL,
    PRIMARY KEY (agent_id, app, metric, at_ms)
) WITHOUT ROWID;
CREATE INDEX experience_app_sample_by_metric ON experience_app_sample (metric, at_ms);

CREATE TABLE experience_app_rollup (
    agent_id TEXT NOT NULL,
    app TEXT NOT NULL,
    metric TEXT NOT NULL,
    span_ms INTEGER NOT NULL,
    start_ms INTEGER NOT NULL,
    count INTEGER NOT NULL,
    sum REAL NOT NULL,
    min REAL NOT NULL,
    max REAL NOT NULL,
    PRIMARY KEY (agent_id, app, metric, span_ms, start_ms)
) WITHOUT ROWID;
CREATE INDEX experience_app_rollup_by_metric ON experience_app_rollup (metric, span_ms, start_ms);

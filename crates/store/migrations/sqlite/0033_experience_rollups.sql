-- Experience history past a day (docs/experience.md): per agent, metric and hour (span_ms
-- 3600000) or day (86400000), the count, sum, least and greatest of its samples, kept up to
-- date as samples arrive, so that raw samples can go after a day and nothing is recounted.
CREATE TABLE experience_rollup (
    agent_id TEXT NOT NULL,
    metric TEXT NOT NULL,
    span_ms INTEGER NOT NULL,
    start_ms INTEGER NOT NULL,
    count INTEGER NOT NULL,
    sum REAL NOT NULL,
    min REAL NOT NULL,
    max REAL NOT NULL,
    PRIMARY KEY (agent_id, metric, span_ms, start_ms)
) WITHOUT ROWID;
CREATE INDEX experience_rollup_by_metric ON experience_rollup (metric, span_ms, start_ms);
-- The fleet's samples of one metric over a window, and retention by age.
CREATE INDEX experience_sample_by_metric ON experience_sample (metric, at_ms);

-- The per-interface experience series (docs/experience.md): per agent, network interface,
-- metric (rx_bytes_per_s, tx_bytes_per_s, errors_per_s, drops_per_s) and sample time; and
-- their hourly and daily rollups, kept like the device's (experience_rollup).
CREATE TABLE experience_interface_sample (
    agent_id TEXT NOT NULL,
    interface TEXT NOT NULL,
    metric TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    value REAL NOT NULL,
    PRIMARY KEY (agent_id, interface, metric, at_ms)
) WITHOUT ROWID;
CREATE INDEX experience_interface_sample_by_metric ON experience_interface_sample (metric, at_ms);

CREATE TABLE experience_interface_rollup (
    agent_id TEXT NOT NULL,
    interface TEXT NOT NULL,
    metric TEXT NOT NULL,
    span_ms INTEGER NOT NULL,
    start_ms INTEGER NOT NULL,
    count INTEGER NOT NULL,
    sum REAL NOT NULL,
    min REAL NOT NULL,
    max REAL NOT NULL,
    PRIMARY KEY (agent_id, interface, metric, span_ms, start_ms)
) WITHOUT ROWID;
CREATE INDEX experience_interface_rollup_by_metric ON experience_interface_rollup (metric, span_ms, start_ms);

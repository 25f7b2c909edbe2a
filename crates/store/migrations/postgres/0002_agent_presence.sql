-- Which replica an agent is connected to now (NULL: none), with `last_seen_ms` refreshed by
-- that replica about once a heartbeat: the others count it online while both say so.
ALTER TABLE agent ADD COLUMN connected_to TEXT;
CREATE INDEX agent_connected ON agent (connected_to) WHERE connected_to IS NOT NULL;

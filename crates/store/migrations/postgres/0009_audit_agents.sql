-- The agents an audit row is about (a JSON array of ids, sorted; NULL for none), so a reader
-- confined to some management groups can read another principal's rows about its agents,
-- and a reader can ask for one agent's rows. Rows written before are about no agent.
ALTER TABLE audit ADD COLUMN agents JSONB;

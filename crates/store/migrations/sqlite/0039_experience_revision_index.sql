-- Every experience read asks which devices' recent views are current: agent and revision, in
-- agent order. Without this index SQLite walked the primary key's index and looked each row
-- up in the table (7 ms at 10,000 devices); with it the answer is read from the index alone
-- (2 ms), for one more index entry to move per report.
CREATE INDEX experience_device_revision ON experience_device (agent_id, revision);

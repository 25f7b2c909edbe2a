-- How many reports brought a device something new: a server keeps a recent view of each device
-- in memory (docs/experience.md, "At scale") and makes it again when this moves, whichever
-- replica took the report.
ALTER TABLE experience_device ADD COLUMN revision BIGINT NOT NULL DEFAULT 0;

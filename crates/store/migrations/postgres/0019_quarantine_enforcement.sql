-- How each agent says it holds a quarantine (network or soft, and why), as JSON: quarantine_device
-- refuses a network quarantine an agent cannot enforce (docs/instructions.md).
ALTER TABLE agent ADD COLUMN quarantine_enforcement TEXT;

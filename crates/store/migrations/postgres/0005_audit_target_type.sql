-- What kind of thing an audit row's target names (McpSession, ToolArguments, BundleStep, ...),
-- so a reader can ask for session rows without parsing targets. Rows written before have none.
ALTER TABLE audit ADD COLUMN target_type TEXT;

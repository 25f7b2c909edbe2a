-- The toolsets a token's client is shown when its requests choose none (docs/toolsets.md):
-- tools.yaml toolset names separated by commas; NULL: its tier's default.
ALTER TABLE api_token ADD COLUMN toolsets TEXT;

-- A client's idempotency key: a retry of execute_instruction / execute_bundle with the same key
-- (same principal) finds the execution it started instead of starting another. The key lives
-- with its execution's row; the digest says which arguments it was given.
ALTER TABLE execution ADD COLUMN idempotency_key TEXT;
ALTER TABLE execution ADD COLUMN arguments_digest TEXT;
CREATE UNIQUE INDEX execution_by_key ON execution (requested_by, idempotency_key) WHERE idempotency_key IS NOT NULL;

-- A ticket is bound to its arguments as shown (sensitive values redacted) and to a digest of
-- the sensitive values alone ('' when there are none): the secret itself is never stored.
ALTER TABLE approval ADD COLUMN sensitive_digest TEXT NOT NULL DEFAULT '';
DROP INDEX approval_pending_once;
CREATE UNIQUE INDEX approval_pending_once
    ON approval (submitter, definition, canonical_args, sensitive_digest) WHERE status = 'pending';

-- A pending ticket is one per submitter, definition, arguments and surface: the same call
-- asked over MCP and over its REST twin makes two tickets, each redeemable only where it
-- was minted.
DROP INDEX approval_pending_once;
CREATE UNIQUE INDEX approval_pending_once
    ON approval (submitter, definition, canonical_args, sensitive_digest, surface) WHERE status = 'pending';

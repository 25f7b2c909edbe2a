-- Revoked agent certificates (docs/trust.md): refused from the revocation on, on every replica
-- and after a restart; the newest certificate of an agent decides whether it may connect
-- without one.
ALTER TABLE issued_cert ADD COLUMN revoked_at_ms INTEGER;
ALTER TABLE issued_cert ADD COLUMN revoked_by TEXT;
ALTER TABLE issued_cert ADD COLUMN revocation_reason TEXT;
CREATE INDEX issued_cert_revoked ON issued_cert (revoked_at_ms) WHERE revoked_at_ms IS NOT NULL;

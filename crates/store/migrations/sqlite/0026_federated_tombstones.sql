-- IdP subjects whose principal was removed (docs/sign-in.md): refused, and never provisioned
-- again on first use, until an administrator re-admits them.
CREATE TABLE federated_tombstone (
    issuer TEXT NOT NULL,
    subject TEXT NOT NULL,
    principal TEXT NOT NULL,
    removed_at INTEGER NOT NULL,
    PRIMARY KEY (issuer, subject)
);

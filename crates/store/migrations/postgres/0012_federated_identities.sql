-- People signed in through an identity provider (docs/sign-in.md): the principal each
-- (issuer, subject) pair is, one pair per principal.
CREATE TABLE federated_identity (
    issuer TEXT NOT NULL,
    subject TEXT NOT NULL,
    principal TEXT NOT NULL UNIQUE,
    display_name TEXT,
    email TEXT,
    created_at BIGINT NOT NULL,
    last_seen_at BIGINT,
    PRIMARY KEY (issuer, subject)
);

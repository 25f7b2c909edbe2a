-- How a principal signs in to the console: an argon2id password hash (PHC string) and a TOTP
-- factor (RFC 6238). The TOTP secret must be readable to check codes; the last time step
-- used is kept so that a code is accepted once. Failed attempts lock sign-in for a while.
CREATE TABLE principal_sign_in (
    principal TEXT PRIMARY KEY,
    password_hash TEXT,
    totp_secret TEXT,
    totp_confirmed_at_ms INTEGER,
    last_totp_step INTEGER,
    failed_attempts INTEGER NOT NULL DEFAULT 0,
    locked_until_ms INTEGER NOT NULL DEFAULT 0
);

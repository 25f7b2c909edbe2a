-- One row the readiness probe rewrites: proof that a write reaches the file.
CREATE TABLE readiness (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    checked_at_ms INTEGER NOT NULL
);

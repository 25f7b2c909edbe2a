-- Certificates the agent CA issued (docs/trust.md): one row per certificate, by serial.
CREATE TABLE issued_cert (
    serial_hex TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    ca_generation INTEGER NOT NULL,
    not_before_ms INTEGER NOT NULL,
    not_after_ms INTEGER NOT NULL,
    issued_at_ms INTEGER NOT NULL,
    reason TEXT NOT NULL
);
CREATE INDEX issued_cert_by_time ON issued_cert (issued_at_ms);
CREATE INDEX issued_cert_by_agent ON issued_cert (agent_id);

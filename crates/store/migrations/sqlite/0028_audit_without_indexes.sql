-- Every call writes an audit row, and each index cost a row about a fifth of its insert.
-- Neither served a reader: the audit query walks rows newest first by id (its optional
-- filters keep SQLite's planner from either index, checked with EXPLAIN QUERY PLAN), and
-- retention now deletes the oldest rows by id, in chunks (sqlite/audit.rs).
DROP INDEX IF EXISTS audit_by_correlation;
DROP INDEX IF EXISTS audit_by_time;

-- The package that owned each program's executable on each device, and its version
-- (docs/experience.md, "Programs"): from the first to the last sample that said so, so that a
-- program's series can be told apart by version, before and after an upgrade.
CREATE TABLE experience_app_package (
    agent_id TEXT NOT NULL,
    program TEXT NOT NULL,
    package TEXT NOT NULL,
    version TEXT NOT NULL,
    first_ms INTEGER NOT NULL,
    last_ms INTEGER NOT NULL,
    PRIMARY KEY (agent_id, program, package, version)
) WITHOUT ROWID;
CREATE INDEX experience_app_package_by_last ON experience_app_package (last_ms);

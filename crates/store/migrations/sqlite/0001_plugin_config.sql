-- Plugin configuration and kill switches.
CREATE TABLE plugin_config (
    plugin TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    updated_by TEXT NOT NULL,
    PRIMARY KEY (plugin, key)
);
CREATE TABLE plugin_kill_switch (
    plugin TEXT NOT NULL,
    action TEXT NOT NULL DEFAULT '',
    engaged INTEGER NOT NULL,
    reason TEXT,
    updated_at INTEGER NOT NULL,
    updated_by TEXT NOT NULL,
    PRIMARY KEY (plugin, action)
);

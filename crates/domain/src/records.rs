//! Rows of the smaller areas: tags, plugin configuration and kill switches, and who changed them.

use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Tag {
    pub key: String,
    pub value: String,
    pub updated_at: i64,
    pub updated_by: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConfigEntry {
    pub plugin: String,
    pub key: String,
    pub value: String,
    pub updated_at: i64,
    pub updated_by: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KillSwitch {
    pub plugin: String,
    /// `None`: the switch for the whole plugin.
    pub action: Option<String>,
    pub enabled: bool,
    pub reason: Option<String>,
    pub updated_at: Option<i64>,
    pub updated_by: Option<String>,
}

/// Who changed something, and when (Unix seconds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change<'a> {
    pub at: i64,
    pub by: &'a str,
}

//! Rows of the smaller areas: tags, plugin configuration and kill switches, and who changed them.

use serde::{Deserialize, Serialize};

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

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KillSwitch {
    pub plugin: String,
    /// `None`: the switch for the whole plugin.
    pub action: Option<String>,
    pub enabled: bool,
    pub reason: Option<String>,
    /// Unix seconds.
    pub updated_at: Option<i64>,
    pub updated_by: Option<String>,
}

impl KillSwitch {
    /// Whether this switch, engaged, stops `plugin`'s `action`.
    pub fn stops(&self, plugin: &str, action: &str) -> bool {
        self.enabled && self.plugin == plugin && self.action.as_deref().is_none_or(|a| a == action)
    }

    /// Why what it stops is refused: the switch, its reason and who set it.
    pub fn refusal(&self) -> String {
        let what = match &self.action {
            Some(action) => format!("action `{}.{action}`", self.plugin),
            None => format!("plugin `{}`", self.plugin),
        };
        format!(
            "refused: the kill switch of {what} is engaged ({}; set by {} at {} Unix time): release it with set_plugin_kill_switch, enabled false",
            self.reason.as_deref().unwrap_or("no reason given"),
            self.updated_by.as_deref().unwrap_or("an unknown principal"),
            self.updated_at.unwrap_or_default()
        )
    }
}

/// The engaged switch among `switches` that stops one of `steps` (plugin, action), if any.
pub fn stopping<'a, 's>(
    switches: &'a [KillSwitch],
    mut steps: impl Iterator<Item = (&'s str, &'s str)>,
) -> Option<&'a KillSwitch> {
    steps.find_map(|(plugin, action)| switches.iter().find(|s| s.stops(plugin, action)))
}

/// Who changed something, and when (Unix seconds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change<'a> {
    pub at: i64,
    pub by: &'a str,
}

//! Quarantine on the wire (docs/instructions.md): the state the server wants an agent in, and
//! how the agent says it holds one.

use serde::{Deserialize, Serialize};

/// How an agent holds a quarantine: `network`, its host cut off but for the server (the agent
/// runs as root with `--allow-network-isolation`), or `soft`, only its changes refused while the
/// network stays open; `why` says which and why (docs/instructions.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuarantineEnforcement {
    pub mode: QuarantineMode,
    pub why: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuarantineMode {
    Network,
    Soft,
}

impl QuarantineMode {
    pub fn as_str(self) -> &'static str {
        match self {
            QuarantineMode::Network => "network",
            QuarantineMode::Soft => "soft",
        }
    }
}

/// The quarantine state the server wants an agent in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuarantineWish {
    pub quarantined: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

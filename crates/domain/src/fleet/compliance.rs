//! Compliance rules (the seeds' Guaranteed State): operator data in `compliance.yaml`, checked
//! by every agent against its own host, so the evidence is what the host says.

use serde::{Deserialize, Serialize};

/// `compliance.yaml`: the rules agents evaluate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(title = "toolgate compliance.yaml"))]
#[serde(deny_unknown_fields)]
pub struct ComplianceFile {
    pub rules: Vec<Rule>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// `[a-z0-9][a-z0-9_.-]*`, unique; what the compliance tools name.
    pub id: String,
    pub description: String,
    /// Rules can be kept in the file but not evaluated.
    #[serde(default = "enabled")]
    pub enabled: bool,
    /// Exactly one check.
    pub check: Check,
}

fn enabled() -> bool {
    true
}

/// What an agent checks on its host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Check {
    /// A package is installed at this version or later (the packaging system's ordering).
    PackageAtLeast { package: String, version: String },
    /// A file holds this exact line (surrounding whitespace ignored).
    FileContainsLine { path: String, line: String },
    /// Nothing listens on this TCP port (IPv4 or IPv6).
    PortNotListening { port: u16 },
    /// A file's SHA-256 is this (64 hex digits).
    FileSha256 { path: String, sha256: String },
}

impl Check {
    pub fn kind(&self) -> &'static str {
        match self {
            Check::PackageAtLeast { .. } => "package_at_least",
            Check::FileContainsLine { .. } => "file_contains_line",
            Check::PortNotListening { .. } => "port_not_listening",
            Check::FileSha256 { .. } => "file_sha256",
        }
    }

    /// Problems a schema cannot see: relative paths, a malformed hash or protocol.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let absolute = |path: &str, problems: &mut Vec<String>| {
            if !path.starts_with('/') {
                problems.push(format!("path `{path}` must be absolute (the agent's working directory is not yours)"));
            }
        };
        match self {
            Check::PackageAtLeast { package, version } => {
                if package.trim().is_empty() || version.trim().is_empty() {
                    problems.push("package and version must not be empty".into());
                }
            }
            Check::FileContainsLine { path, .. } => absolute(path, &mut problems),
            Check::PortNotListening { port } => {
                if *port == 0 {
                    problems.push("port must be 1-65535".into());
                }
            }
            Check::FileSha256 { path, sha256 } => {
                absolute(path, &mut problems);
                if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                    problems.push("sha256 must be 64 hex digits".into());
                }
            }
        }
        problems
    }
}

/// Where one agent stands on one rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComplianceStatus {
    Compliant,
    NonCompliant,
    /// The agent could not tell (no package database, an unreadable file): `evidence` says why.
    Unknown,
}

impl ComplianceStatus {
    pub const ALL: [ComplianceStatus; 3] =
        [ComplianceStatus::Compliant, ComplianceStatus::NonCompliant, ComplianceStatus::Unknown];

    pub fn as_str(self) -> &'static str {
        match self {
            ComplianceStatus::Compliant => "compliant",
            ComplianceStatus::NonCompliant => "non_compliant",
            ComplianceStatus::Unknown => "unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// One rule's outcome on one agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleResult {
    pub rule_id: String,
    pub status: ComplianceStatus,
    /// What the agent saw (the installed version, the file's hash), or why it could not tell.
    pub evidence: String,
}

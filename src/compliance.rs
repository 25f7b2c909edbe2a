//! `compliance.yaml`: the compliance rules, operator data read at start and on SIGHUP. A file
//! that does not pass is refused with every problem at `file:line:col`; on a reload the
//! server keeps the last good set.

use std::path::{Path, PathBuf};

use toolgate_catalogue::SourceFile;
use toolgate_domain::fleet::compliance::ComplianceFile;
use toolgate_fleet::{Hub, RuleSet};

/// The file's name in the data dir, used when `--compliance` is not given.
pub const DEFAULT_FILE: &str = "compliance.yaml";

/// Where the rules come from: the named file (which must exist), or DATA_DIR/compliance.yaml
/// (which may not: then there are no rules).
#[derive(Clone, Debug)]
pub struct RuleSource {
    pub path: PathBuf,
    pub required: bool,
}

impl RuleSource {
    pub fn new(explicit: Option<PathBuf>, data_dir: &Path) -> Self {
        match explicit {
            Some(path) => Self { path, required: true },
            None => Self { path: data_dir.join(DEFAULT_FILE), required: false },
        }
    }

    /// Reads and checks the file; every problem rendered, rustc-style, in the error.
    pub fn load(&self) -> Result<RuleSet, String> {
        let name = self.path.display().to_string();
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !self.required => {
                return Ok(RuleSet { source: format!("{name} (absent: no rules)"), rules: Vec::new() });
            }
            Err(e) => return Err(format!("cannot read {name}: {e}")),
        };
        let file = SourceFile::new(name.clone(), text);
        match toolgate_catalogue::instructions::check_compliance(&file) {
            Ok(ComplianceFile { rules }) => Ok(RuleSet { source: name, rules }),
            Err(diagnostics) => {
                let rendered: Vec<String> = diagnostics.iter().map(|d| d.render(Some(&file.text))).collect();
                Err(format!("{} problem(s) in {name}:\n{}", diagnostics.len(), rendered.join("\n")))
            }
        }
    }
}

/// Reloads the rules on every SIGHUP until `stop`; a bad file is logged and the last good
/// set stays in force.
pub async fn reload_on_hangup(hub: std::sync::Arc<Hub>, source: RuleSource, stop: toolgate_domain::CancellationToken) {
    let Ok(mut hangups) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
        tracing::error!("cannot install the SIGHUP handler: compliance rules reload only on restart");
        return;
    };
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = hangups.recv() => {}
        }
        match source.load() {
            Ok(set) => {
                tracing::info!("compliance rules reloaded from {}: {} rule(s)", set.source, set.rules.len());
                hub.set_rules(set);
            }
            Err(e) => tracing::error!(
                "compliance rules not reloaded; the previous {} rule(s) stay in force. {e}",
                hub.rules().rules.len()
            ),
        }
    }
}

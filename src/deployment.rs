//! The deployment settings file (`--config`, docs/sign-in.md): the public URL and sign-in
//! through the organisation's identity provider. Read and checked at start; a bad file stops
//! the server with every problem at `file:line:col`. The management groups it names are
//! checked against the store once that is open ([`check_groups`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolgate_catalogue::SourceFile;
use toolgate_catalogue::deployment::{Deployment, PolicyNames, UploadLimits};
use toolgate_domain::catalogue::Catalogue;

/// The file's name in the data dir, used when `--config` is not given.
pub const DEFAULT_FILE: &str = "toolgate.yaml";

/// The checked file, and the secrets its files name (read at start, kept by path).
#[derive(Clone)]
pub struct Settings {
    pub file: Arc<Deployment>,
    secrets: BTreeMap<String, String>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings").field("file", &self.file.parsed.file.name).finish_non_exhaustive()
    }
}

impl Settings {
    /// The secret read from `path` at start.
    pub fn secret(&self, path: &str) -> Option<&str> {
        self.secrets.get(path).map(String::as_str)
    }
}

/// The secret in `path`: its one line, trimmed.
fn read_secret(path: &str) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read the secret file {path}: {e}"))?;
    match text.trim() {
        "" => Err(format!("the secret file {path} is empty")),
        secret => Ok(secret.to_string()),
    }
}

/// Reads the named file (which must exist), or DATA_DIR/toolgate.yaml (which may not: then
/// nothing is set).
pub fn load(explicit: Option<&Path>, data_dir: &Path, catalogue: &Catalogue) -> Result<Option<Settings>, String> {
    let path: PathBuf = explicit.map_or_else(|| data_dir.join(DEFAULT_FILE), Path::to_path_buf);
    let name = path.display().to_string();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && explicit.is_none() => return Ok(None),
        Err(e) => return Err(format!("cannot read the deployment settings {name}: {e}")),
    };
    let classes = retention_classes(catalogue);
    let policy = PolicyNames {
        tiers: catalogue.tiers.iter().map(|t| (t.name, t.scope)).collect(),
        roles: catalogue.role_names().collect(),
        retention_classes: classes.iter().map(String::as_str).collect(),
        toolsets: catalogue.toolsets.iter().map(|t| t.name).collect(),
    };
    let file = SourceFile::new(name.clone(), text);
    let deployment = toolgate_catalogue::deployment::check(&file, &policy).map_err(|diagnostics| {
        let rendered: Vec<String> = diagnostics.iter().map(|d| d.render(Some(&file.text))).collect();
        format!("{} problem(s) in {name}:\n{}", diagnostics.len(), rendered.join("\n"))
    })?;
    let secrets = deployment
        .settings()
        .secret_files()
        .into_iter()
        .map(|path| Ok((path.to_string(), read_secret(path)?)))
        .collect::<Result<_, String>>()?;
    Ok(Some(Settings { file: Arc::new(deployment), secrets }))
}

/// `mint_upload_grant`'s `retention_class` schema, where the catalogue says which classes
/// there are and which is the default.
fn retention_schema(catalogue: &Catalogue) -> serde_json::Value {
    let Some(mint) = catalogue.tools.iter().find(|t| t.name == "mint_upload_grant") else { return Default::default() };
    let schema: serde_json::Value = serde_json::from_str(mint.input_schema).unwrap_or_default();
    schema["properties"]["retention_class"].clone()
}

/// The retention classes the catalogue offers: `mint_upload_grant`'s `retention_class` enum.
pub fn retention_classes(catalogue: &Catalogue) -> Vec<String> {
    let classes = retention_schema(catalogue)["enum"].as_array().cloned().unwrap_or_default();
    classes.iter().filter_map(|c| c.as_str().map(str::to_string)).collect()
}

/// The class a grant gets when the call names none: the schema's `default`.
pub fn default_retention_class(catalogue: &Catalogue) -> Option<String> {
    retention_schema(catalogue)["default"].as_str().map(str::to_string)
}

/// The upload limits: the settings file's, or (without one) the defaults.
pub fn upload_limits(settings: Option<&Settings>, catalogue: &Catalogue) -> Result<UploadLimits, String> {
    if let Some(settings) = settings {
        return Ok(settings.file.uploads.clone());
    }
    let classes = retention_classes(catalogue);
    let classes: Vec<&str> = classes.iter().map(String::as_str).collect();
    toolgate_catalogue::deployment::uploads::check(None, &classes).map_err(|problems| {
        let lines: Vec<String> = problems.into_iter().map(|(_, message, help)| format!("{message} ({help})")).collect();
        format!("the upload retention classes need a deployment settings file (--config):\n{}", lines.join("\n"))
    })
}

/// Every management group the group-to-role mapping names exists.
pub async fn check_groups(deployment: &Deployment, groups: &dyn toolgate_store::GroupStore) -> Result<(), String> {
    let mut missing = Vec::new();
    let mappings = deployment.settings().oauth.iter().flat_map(|o| o.group_roles.iter().enumerate());
    let named = mappings.filter_map(|(i, m)| {
        m.management_group.as_deref().map(|g| (format!("/oauth/group_roles/{i}/management_group"), g))
    });
    for (pointer, id) in named {
        if groups.management_group(id).await.map_err(|e| e.to_string())?.is_none() {
            missing.push(deployment.problem(
                &pointer,
                format!("no management group `{id}`"),
                "`toolgate group list` shows their ids; create the group first",
            ));
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("{} problem(s) in the deployment settings:\n{}", missing.len(), missing.join("\n")))
    }
}

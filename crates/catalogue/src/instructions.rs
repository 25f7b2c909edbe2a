//! Plugin manifests + `instructions.yaml` -> one checked [`InstructionSet`]. A definition must
//! name an action some manifest declares, pass only (and every required one of) its
//! parameters through a valid JSON Schema, keep its class and return only its columns. Every
//! problem is reported at once, at `file:line:col`.

use std::collections::BTreeSet;

use serde_json::{Map, Value};
use toolgate_domain::fleet::compliance::ComplianceFile;
use toolgate_domain::fleet::instruction::{
    Action, ActionClass, Definition, DefinitionsFile, InstructionSet, PluginManifest,
};

use crate::diag::{self, Diagnostic, did_you_mean};
use crate::load::{self, Parsed};
use crate::source::SourceFile;

/// The longest a definition may let one agent take.
pub const MAX_TIMEOUT_MS: u64 = 3_600_000;

/// The manifests (any order) and the definitions file.
pub struct InstructionInputs {
    pub manifests: Vec<SourceFile>,
    pub definitions: SourceFile,
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && s.len() <= 64
}

struct At<'a, T> {
    parsed: &'a Parsed<T>,
}

impl<T> At<'_, T> {
    fn error(&self, pointer: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic::error(&self.parsed.file.name, self.parsed.map.value(pointer), message)
    }
}

/// Where the two live, relative to the workspace root.
pub const MANIFESTS_DIR: &str = "crates/agent/plugins";
pub const DEFINITIONS_FILE: &str = "instructions.yaml";

impl InstructionInputs {
    /// Reads every `*.yaml` manifest (in name order) and the definitions under `root`.
    pub fn read(root: &std::path::Path) -> Result<Self, String> {
        let read = |relative: String| {
            SourceFile::read(&root.join(&relative), relative.clone())
                .map_err(|e| format!("cannot read {relative}: {e}"))
        };
        let dir = root.join(MANIFESTS_DIR);
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .map_err(|e| format!("cannot read {MANIFESTS_DIR}: {e}"))?
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| name.ends_with(".yaml"))
            .collect();
        names.sort();
        let manifests = names.into_iter().map(|n| read(format!("{MANIFESTS_DIR}/{n}"))).collect::<Result<_, _>>()?;
        Ok(Self { manifests, definitions: read(DEFINITIONS_FILE.to_string())? })
    }
}

/// Checks everything; `Ok` is the set the build compiles in.
pub fn check(inputs: &InstructionInputs) -> Result<InstructionSet, Vec<Diagnostic>> {
    let mut errors = Vec::new();
    let mut manifests = Vec::new();
    for file in &inputs.manifests {
        match load::parse::<PluginManifest>(file) {
            Ok(parsed) => manifests.push(parsed),
            Err(d) => errors.extend(d),
        }
    }
    let mut seen = BTreeSet::new();
    for parsed in &manifests {
        check_manifest(parsed, &mut seen, &mut errors);
    }
    let plugins: Vec<PluginManifest> = manifests.into_iter().map(|p| p.model).collect();
    let definitions = match load::parse::<DefinitionsFile>(&inputs.definitions) {
        Ok(parsed) => {
            let at = At { parsed: &parsed };
            let mut names = BTreeSet::new();
            for (i, d) in parsed.model.definitions.iter().enumerate() {
                check_definition(&at, i, d, &plugins, &mut names, &mut errors);
            }
            parsed.model.definitions
        }
        Err(d) => {
            errors.extend(d);
            Vec::new()
        }
    };
    if errors.is_empty() {
        Ok(InstructionSet { plugins, definitions })
    } else {
        diag::sort(&mut errors);
        Err(errors)
    }
}

fn check_manifest(parsed: &Parsed<PluginManifest>, seen: &mut BTreeSet<String>, out: &mut Vec<Diagnostic>) {
    let at = At { parsed };
    let m = &parsed.model;
    if !is_name(&m.plugin) {
        out.push(at.error("/plugin", format!("plugin name `{}` must match [a-z][a-z0-9_]*", m.plugin)));
    }
    if !seen.insert(m.plugin.clone()) {
        out.push(at.error("/plugin", format!("plugin `{}` is declared by another manifest too", m.plugin)));
    }
    let mut actions = BTreeSet::new();
    for (i, a) in m.actions.iter().enumerate() {
        if !is_name(&a.name) {
            out.push(
                at.error(&format!("/actions/{i}/name"), format!("action name `{}` must match [a-z][a-z0-9_]*", a.name)),
            );
        }
        if !actions.insert(&a.name) {
            out.push(at.error(&format!("/actions/{i}/name"), format!("action `{}` is declared twice", a.name)));
        }
        let duplicate = |names: Vec<&String>| {
            let mut set = BTreeSet::new();
            names.into_iter().position(|n| !set.insert(n))
        };
        if let Some(j) = duplicate(a.params.iter().map(|p| &p.name).collect()) {
            out.push(at.error(&format!("/actions/{i}/params/{j}/name"), "this parameter is declared twice"));
        }
        if let Some(j) = duplicate(a.columns.iter().map(|c| &c.name).collect()) {
            out.push(at.error(&format!("/actions/{i}/columns/{j}/name"), "this column is declared twice"));
        }
        if a.columns.is_empty() {
            out.push(at.error(&format!("/actions/{i}/columns"), "an action returns rows: declare at least one column"));
        }
        match (a.class, &a.plan) {
            (ActionClass::Change, None) => out.push(
                at.error(&format!("/actions/{i}/class"), format!("change `{}` declares no plan", a.name)).help(
                    "add `plan:` with the columns of what it would change (computed changing nothing): a person \
                     approves the plan, and the agent applies only that one",
                ),
            ),
            (ActionClass::Read, Some(_)) => out.push(at.error(
                &format!("/actions/{i}/plan"),
                format!("read `{}` declares a plan: only a change has one (a read changes nothing)", a.name),
            )),
            (_, Some(plan)) if plan.is_empty() => {
                out.push(at.error(&format!("/actions/{i}/plan"), "a plan returns rows: declare at least one column"));
            }
            (_, Some(plan)) => {
                if let Some(j) = duplicate(plan.iter().map(|c| &c.name).collect()) {
                    out.push(at.error(&format!("/actions/{i}/plan/{j}/name"), "this plan column is declared twice"));
                }
            }
            (ActionClass::Read, None) => {}
        }
        for (field, what) in [("secrets", "secret"), ("config", "configuration key")] {
            let named = if field == "secrets" { &a.secrets } else { &a.config };
            if let Some(j) = duplicate(named.iter().map(|s| &s.name).collect()) {
                out.push(at.error(&format!("/actions/{i}/{field}/{j}/name"), format!("this {what} is declared twice")));
            }
            for (j, s) in named.iter().enumerate() {
                // The keys set_plugin_secret and set_plugin_config take.
                let valid = s.name.len() <= 128
                    && s.name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
                    && s.name.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
                if !valid {
                    let message = format!(
                        "{what} name `{}` must match [A-Za-z0-9][A-Za-z0-9_.-]* (a plugin {what}'s key)",
                        s.name
                    );
                    out.push(at.error(&format!("/actions/{i}/{field}/{j}/name"), message));
                }
            }
        }
    }
}

fn check_definition(
    at: &At<'_, DefinitionsFile>,
    i: usize,
    d: &Definition,
    plugins: &[PluginManifest],
    names: &mut BTreeSet<String>,
    out: &mut Vec<Diagnostic>,
) {
    let here = |sub: &str| format!("/definitions/{i}{sub}");
    let error = |sub: &str, message: String| at.error(&here(sub), format!("definition `{}`: {message}", d.name));
    if !is_name(&d.name) {
        out.push(error("/name", "the name must match [a-z][a-z0-9_]* (at most 64 characters)".into()));
    }
    if !names.insert(d.name.clone()) {
        out.push(error("/name", "another definition has this name".into()));
    }
    if d.timeout_ms == 0 || d.timeout_ms > MAX_TIMEOUT_MS {
        out.push(error("/timeout_ms", format!("timeout_ms must be 1-{MAX_TIMEOUT_MS}, not {}", d.timeout_ms)));
    }
    if d.diagnostic && d.class != ActionClass::Read {
        out.push(
            error("/diagnostic", "only read-only definitions can be diagnostic (run during quarantine)".into())
                .help("remove `diagnostic: true`, or use a read action"),
        );
    }
    let Some(plugin) = plugins.iter().find(|p| p.plugin == d.plugin) else {
        let known = plugins.iter().map(|p| p.plugin.as_str());
        let hint = if plugins.is_empty() { "no manifest could be read".into() } else { did_you_mean(&d.plugin, known) };
        out.push(
            error("/plugin", format!("no plugin manifest declares plugin `{}`", d.plugin))
                .help(format!("{hint} (manifests: {MANIFESTS_DIR}/*.yaml)")),
        );
        return;
    };
    let Some(action) = plugin.actions.iter().find(|a| a.name == d.action) else {
        let known = plugin.actions.iter().map(|a| a.name.as_str());
        out.push(
            error("/action", format!("plugin `{}` declares no action `{}`", d.plugin, d.action))
                .help(did_you_mean(&d.action, known)),
        );
        return;
    };
    if d.class == ActionClass::Change {
        for (field, what) in [("touches", &d.touches), ("undo", &d.undo)] {
            if what.as_deref().is_none_or(|t| t.trim().is_empty()) {
                let help = match field {
                    "touches" => "say what it changes on the host (units, packages, files): the approver reads it",
                    _ => "say how to undo it, or why it cannot be: the approver reads it",
                };
                out.push(error("/class", format!("a change must declare `{field}`")).help(help));
            }
        }
    } else if d.touches.is_some() || d.undo.is_some() {
        let field = if d.touches.is_some() { "/touches" } else { "/undo" };
        out.push(error(field, "only a change declares `touches` and `undo`".into()));
    }
    if d.class != action.class {
        out.push(
            error(
                "/class",
                format!(
                    "class `{}` contradicts action `{}.{}`, which is `{}`",
                    d.class.as_str(),
                    d.plugin,
                    d.action,
                    action.class.as_str()
                ),
            )
            .help(format!("set `class: {}`: a definition never hides a change behind a read", action.class.as_str())),
        );
    }
    for problem in crate::check::keywords::scan(&d.parameters) {
        let key = at.parsed.map.key(&here(&format!("/parameters{}", problem.pointer)));
        let message = format!("definition `{}`: parameters: {}", d.name, problem.message);
        out.push(Diagnostic::error(&at.parsed.file.name, key, message).help(problem.help));
    }
    parameter_rules(&d.parameters, action, &error, out);
    let mut passed = BTreeSet::new();
    for (j, name) in d.secrets.iter().enumerate() {
        if !action.secrets.iter().any(|s| &s.name == name) {
            let known = action.secrets.iter().map(|s| s.name.as_str());
            let hint = if action.secrets.is_empty() {
                format!(
                    "action `{}.{}` reads no secret: declare it under the action's `secrets` first",
                    d.plugin, d.action
                )
            } else {
                did_you_mean(name, known)
            };
            out.push(
                error(&format!("/secrets/{j}"), format!("action `{}.{}` reads no secret `{name}`", d.plugin, d.action))
                    .help(hint),
            );
        } else if !passed.insert(name) {
            out.push(error(&format!("/secrets/{j}"), format!("secret `{name}` is listed twice")));
        }
    }
    if !d.secrets.is_empty() && d.diagnostic {
        out.push(
            error(
                "/secrets",
                "a diagnostic definition runs on a quarantined agent: it may not be given secrets".into(),
            )
            .help("drop `diagnostic: true`, or the secrets"),
        );
    }
    if let Some(columns) = &d.columns {
        if columns.is_empty() {
            out.push(error("/columns", "list at least one column, or leave `columns` out for all".into()));
        }
        let mut seen = BTreeSet::new();
        for (j, c) in columns.iter().enumerate() {
            if !action.columns.iter().any(|ac| &ac.name == c) {
                let known = action.columns.iter().map(|ac| ac.name.as_str());
                out.push(
                    error(&format!("/columns/{j}"), format!("action `{}.{}` has no column `{c}`", d.plugin, d.action))
                        .help(did_you_mean(c, known)),
                );
            } else if !seen.insert(c) {
                out.push(error(&format!("/columns/{j}"), format!("column `{c}` is listed twice")));
            }
        }
    }
}

fn parameter_rules(
    parameters: &Map<String, Value>,
    action: &Action,
    error: &dyn Fn(&str, String) -> Diagnostic,
    out: &mut Vec<Diagnostic>,
) {
    let schema = Value::Object(parameters.clone());
    if let Err(e) = jsonschema::draft202012::meta::validate(&schema) {
        let path = e.instance_path().as_str().to_string();
        out.push(error(&format!("/parameters{path}"), format!("parameters is not valid JSON Schema 2020-12: {e}")));
        return;
    }
    if let Err(e) = jsonschema::options().with_draft(jsonschema::Draft::Draft202012).build(&schema) {
        out.push(error("/parameters", format!("parameters does not compile: {e}")));
        return;
    }
    if parameters.get("type").and_then(Value::as_str) != Some("object") {
        out.push(error("/parameters", "parameters must have `type: object` at its root".into()));
    }
    if parameters.get("additionalProperties") != Some(&Value::Bool(false)) {
        out.push(
            error("/parameters", "parameters must say `additionalProperties: false`".into())
                .help("only the action's declared parameters may reach the agent"),
        );
    }
    let properties = parameters.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    for (name, property) in &properties {
        let pointer = format!("/parameters/properties/{}", crate::source::escape_token(name));
        let Some(param) = action.params.iter().find(|p| &p.name == name) else {
            let known = action.params.iter().map(|p| p.name.as_str());
            let help = if action.params.is_empty() {
                "this action takes no parameters".into()
            } else {
                did_you_mean(name, known)
            };
            out.push(error(&pointer, format!("action `{}` takes no parameter `{name}`", action.name)).help(help));
            continue;
        };
        let declared = param.kind.json_type();
        if property.get("type").and_then(Value::as_str) != Some(declared) {
            out.push(
                error(&pointer, format!("parameter `{name}` must be `type: {declared}`, as the action declares"))
                    .help(format!("set `type: {declared}`")),
            );
        }
    }
    let required: BTreeSet<&str> =
        parameters.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    for param in action.params.iter().filter(|p| p.required) {
        if !properties.contains_key(&param.name) || !required.contains(param.name.as_str()) {
            out.push(
                error("/parameters", format!("action `{}` cannot run without `{}`", action.name, param.name))
                    .help(format!("declare `{}` under properties and list it in `required`", param.name)),
            );
        }
    }
}

/// The JSON Schemas of the two formats, for editors (`schemas/*.json`).
pub fn editor_schemas() -> Vec<(&'static str, Value)> {
    vec![
        ("plugin.schema.json", load::schema_of::<PluginManifest>()),
        ("instructions.schema.json", load::schema_of::<DefinitionsFile>()),
        ("compliance.schema.json", load::schema_of::<ComplianceFile>()),
    ]
}

/// Reads `compliance.yaml` (operator data, read at start and on SIGHUP): its shape, unique
/// ids and what a schema cannot say (absolute paths, hash digits), at `file:line:col`.
pub fn check_compliance(file: &SourceFile) -> Result<ComplianceFile, Vec<Diagnostic>> {
    let parsed = load::parse::<ComplianceFile>(file)?;
    let at = At { parsed: &parsed };
    let mut errors = Vec::new();
    let mut ids = BTreeSet::new();
    for (i, rule) in parsed.model.rules.iter().enumerate() {
        let valid_id = rule.id.len() <= 128
            && rule.id.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            && rule.id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.-".contains(c));
        if !valid_id {
            errors.push(
                at.error(&format!("/rules/{i}/id"), format!("rule id `{}` must match [a-z0-9][a-z0-9_.-]*", rule.id)),
            );
        }
        if !ids.insert(rule.id.as_str()) {
            errors.push(at.error(&format!("/rules/{i}/id"), format!("another rule has the id `{}`", rule.id)));
        }
        for problem in rule.check.problems() {
            errors.push(
                at.error(&format!("/rules/{i}/check/{}", rule.check.kind()), format!("rule `{}`: {problem}", rule.id)),
            );
        }
    }
    if errors.is_empty() { Ok(parsed.model) } else { Err(errors) }
}

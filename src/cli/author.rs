//! The author-facing commands: `check`, `explain`, `tools list`. They run the same generator
//! as the build, so their messages are the build's messages.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::Value;
use toolgate_catalogue::check::handler_scan::scanned_handlers;
use toolgate_catalogue::check::handlers::RustHandlers;
use toolgate_catalogue::policy::{self, Decision};
use toolgate_catalogue::{Checked, Diagnostic, Inputs, SourceFile};

use crate::registry;

/// Which pair of files a command reads.
#[derive(Debug, Default, Clone, clap::Args)]
pub struct CatalogueFiles {
    /// tools.yaml to read [default: the catalogue this binary was built from]
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,
    /// policy.yaml to read [default: the policy this binary was built from]
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
}

fn read(path: &Path) -> Result<SourceFile> {
    SourceFile::read(path, path.display().to_string()).with_context(|| format!("cannot read {}", path.display()))
}

impl CatalogueFiles {
    /// The named files, or the embedded ones this binary was built from.
    fn sources(&self) -> Result<(SourceFile, SourceFile)> {
        let tools = match &self.tools {
            Some(p) => read(p)?,
            None => SourceFile::new(file_name(registry::TOOLS_YAML_PATH), registry::TOOLS_YAML),
        };
        let policy = match &self.policy {
            Some(p) => read(p)?,
            None => SourceFile::new(file_name(registry::POLICY_YAML_PATH), registry::POLICY_YAML),
        };
        Ok((tools, policy))
    }
}

fn file_name(path: &str) -> String {
    Path::new(path).file_name().map_or(path.to_string(), |n| n.to_string_lossy().into_owned())
}

fn print_diagnostics(diagnostics: &[Diagnostic], tools: &SourceFile, policy: &SourceFile) {
    for d in diagnostics {
        let text = if d.file == tools.name {
            Some(tools.text.as_str())
        } else if d.file == policy.name {
            Some(policy.text.as_str())
        } else {
            None
        };
        eprintln!("{}", d.render(text));
    }
}

/// Loads and checks, printing every diagnostic; fails when there are errors.
fn load(tools: SourceFile, policy: SourceFile) -> Result<Checked> {
    let inputs = Inputs { tools, policy };
    match toolgate_catalogue::check(&inputs, None) {
        Ok(checked) => {
            print_diagnostics(&checked.warnings, &inputs.tools, &inputs.policy);
            Ok(checked)
        }
        Err(diagnostics) => {
            print_diagnostics(&diagnostics, &inputs.tools, &inputs.policy);
            let errors = diagnostics.iter().filter(|d| d.is_error()).count();
            bail!("{errors} error(s) in {} / {}", inputs.tools.name, inputs.policy.name)
        }
    }
}

/// `toolgate check`: every build-time rule, without compiling. The handlers are found by a
/// scan of `src/handlers/` beside tools.yaml (the build parses them; both say the same).
/// False on errors.
pub fn check(tools: &Path, policy: &Path) -> Result<bool> {
    let started = Instant::now();
    let (tools_file, policy_file) = (read(tools)?, read(policy)?);
    let inputs = Inputs { tools: tools_file, policy: policy_file };
    let handlers_dir = tools.parent().unwrap_or(Path::new(".")).join("src/handlers");
    let scanned = handlers_dir.is_dir().then(|| scanned_handlers(&handlers_dir));
    let result = toolgate_catalogue::check(&inputs, scanned.as_ref().map(|s| s as &dyn RustHandlers));
    let diagnostics = match &result {
        Ok(checked) => checked.warnings.clone(),
        Err(all) => all.clone(),
    };
    print_diagnostics(&diagnostics, &inputs.tools, &inputs.policy);
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    let warnings = diagnostics.len() - errors;
    let elapsed = started.elapsed().as_millis();
    let handler_note = match scanned {
        Some(_) => String::new(),
        None => format!("; handlers not checked: no {} (cargo build checks them)", handlers_dir.display()),
    };
    let root = tools.parent().unwrap_or(Path::new("."));
    let instructions_ok = super::declared::check_instructions(root);
    let signals_ok = super::declared::check_signals(root);
    match result {
        Ok(_) if !instructions_ok || !signals_ok => Ok(false),
        Ok(checked) => {
            println!(
                "{} and {}: {} tools, {} tiers, {} roles; {errors} errors, {warnings} warnings ({elapsed} ms){handler_note}",
                inputs.tools.name,
                inputs.policy.name,
                checked.tools.model.tools.len(),
                checked.policy.model.tiers.len(),
                checked.policy.model.roles.len(),
            );
            Ok(true)
        }
        Err(_) => {
            println!(
                "{} and {}: {errors} errors, {warnings} warnings ({elapsed} ms){handler_note}",
                inputs.tools.name, inputs.policy.name
            );
            Ok(false)
        }
    }
}

/// Each tier's decision for the pair and the rule behind it, then the roles that grant it.
fn tiers_and_roles(
    out: &mut String,
    policy_model: &toolgate_catalogue::model::Policy,
    securable: &str,
    operation: &str,
) {
    let pair = format!("{securable}:{operation}");
    let _ = writeln!(out, "  tiers");
    let width = policy_model.tiers.iter().map(|t| t.name.len()).max().unwrap_or(0);
    for tier in &policy_model.tiers {
        let v = policy::decide(policy_model, &tier.name, securable, operation);
        let why = match (&v.decision, &v.allowed_by, &v.approval_by, &v.confirm_by) {
            (Decision::Deny, ..) => {
                format!("no allow rule of tier `{}` matches {pair}", tier.name)
            }
            (_, Some(allow), Some(approval), _) => {
                format!("allowed by `{allow}`; approval required by `{approval}`")
            }
            (_, Some(allow), None, Some(confirm)) => format!(
                "allowed by `{allow}`; no approval rule matches; the client's own user confirms first (`{confirm}`)"
            ),
            (_, Some(allow), None, None) => format!("allowed by `{allow}`; no approval rule matches"),
            _ => String::new(),
        };
        let _ = writeln!(out, "    {:width$}  {:8}  {why}", tier.name, v.decision.label());
    }
    let _ = writeln!(out, "    {:width$}  {:8}  a tier policy.yaml does not declare allows nothing", "(other)", "deny");
    let roles: Vec<&str> = policy_model
        .roles
        .iter()
        .filter(|r| {
            policy::role_grants(policy_model, r)
                .iter()
                .any(|p| policy::Pattern::parse(p).is_ok_and(|p| p.matches(securable, operation)))
        })
        .map(|r| r.name.as_str())
        .collect();
    let _ = writeln!(
        out,
        "  roles       {} (RBAC: the caller's principal needs one of these)",
        if roles.is_empty() { "none".to_string() } else { roles.join(", ") }
    );
}

/// `toolgate explain <tool | prompt | resource>`: where a tool's hints and decisions come
/// from; for a prompt or resource, its pair, decisions and what it leads to.
pub fn explain(name: &str, files: &CatalogueFiles) -> Result<String> {
    let (tools, policy_file) = files.sources()?;
    let checked = load(tools, policy_file)?;
    let catalogue = &checked.tools.model.tools;
    let Some(index) = catalogue.iter().position(|t| t.name == name) else {
        if let Some(page) = explain_prompt_resource(name, &checked) {
            return Ok(page);
        }
        if let Some(page) = super::toolsets::explain(name, &checked) {
            return Ok(page);
        }
        let model = &checked.tools.model;
        let names = catalogue
            .iter()
            .map(|t| t.name.as_str())
            .chain(model.prompts.iter().map(|p| p.name.as_str()))
            .chain(model.resources.iter().map(|r| r.name.as_str()))
            .chain(model.resource_templates.iter().map(|t| t.name.as_str()))
            .chain(model.toolsets.iter().map(|t| t.name.as_str()))
            .chain(["toolsets"]);
        bail!("no tool, prompt, resource or toolset named `{name}`; {}", toolgate_policy::did_you_mean(name, names));
    };
    let tool = &catalogue[index];
    let plan = &checked.plans[index];
    let policy_model = &checked.policy.model;
    let pair = format!("{}:{}", tool.securable, tool.operation);
    let a = tool.annotations;
    let mut out = String::new();
    let _ = writeln!(out, "{} — {}", tool.name, tool.title);
    let _ = writeln!(out, "  {}", tool.description);
    let _ = writeln!(out, "  permission  {pair} ({}-class operation)", plan.class.label());
    if !tool.authorization.is_permission() {
        let _ = writeln!(out, "  decided by  {}", tool.authorization.explained());
    }
    if let Some(precondition) = tool.precondition {
        let _ = writeln!(out, "  requires    {} ({})", precondition.explained(), precondition.key());
    }
    let _ = writeln!(
        out,
        "  hints       readOnlyHint={} destructiveHint={} idempotentHint={} openWorldHint={}",
        a.readOnlyHint, a.destructiveHint, a.idempotentHint, a.openWorldHint
    );
    if let Some(o) = &tool.hint_override {
        let _ = writeln!(out, "  override    {} waived: {}", o.hint.key(), o.reason);
    }
    let _ = writeln!(out, "  handler     {}", tool.handler);
    if let Some(set) = &tool.toolset {
        let _ = writeln!(out, "  toolset     {set} (`toolgate explain {set}`)");
    }
    tiers_and_roles(&mut out, policy_model, &tool.securable, &tool.operation);
    let schema = Value::Object(plan.published_input_schema.clone());
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let props = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    let describe = |names: Vec<&String>| -> String {
        if names.is_empty() {
            return "none".into();
        }
        names
            .iter()
            .map(|n| {
                let ty = props[n.as_str()]
                    .get("type")
                    .map_or("any".to_string(), |t| t.as_str().map_or(t.to_string(), str::to_string));
                format!("{n} ({ty})")
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(out, "  arguments");
    let _ =
        writeln!(out, "    required  {}", describe(props.keys().filter(|k| required.contains(&k.as_str())).collect()));
    let _ =
        writeln!(out, "    optional  {}", describe(props.keys().filter(|k| !required.contains(&k.as_str())).collect()));
    if plan.approval_gated {
        let _ =
            writeln!(out, "    approval_id is added by toolgate: call once, have a human approve, call again with it");
    }
    match &plan.example {
        Some(example) => {
            let call = serde_json::json!({"name": tool.name, "arguments": example});
            let _ = writeln!(out, "  example     tools/call {call}");
        }
        None => {
            let _ = writeln!(out, "  example     (none generated: the schema is beyond simple examples)");
        }
    }
    Ok(out)
}

/// `toolgate tools list [--tier T]`: the `tools/list` result a client of that tier gets.
pub fn tools_list(tier: Option<&str>, files: &CatalogueFiles) -> Result<String> {
    let tools_json = if files.tools.is_none() && files.policy.is_none() {
        // What this binary serves, byte for byte.
        match tier {
            None => registry::TOOLS_LIST_ALL.to_string(),
            Some(t) => match registry::Tier::from_name(t) {
                Some(tier) => registry::TOOLS_LIST_BY_TIER[tier.index()].to_string(),
                None => bail!("{}", unknown_tier(t, registry::Tier::ALL.iter().map(|t| t.name()))),
            },
        }
    } else {
        let (tools, policy_file) = files.sources()?;
        let checked = load(tools, policy_file)?;
        match tier {
            None => toolgate_catalogue::tools_list::full(&checked),
            Some(t) => {
                let per_tier = toolgate_catalogue::tools_list::per_tier(&checked);
                match per_tier.into_iter().find(|(name, _)| name == t) {
                    Some((_, bytes)) => bytes,
                    None => bail!("{}", unknown_tier(t, checked.policy.model.tiers.iter().map(|t| t.name.as_str()))),
                }
            }
        }
    };
    let tools: Value = serde_json::from_str(&tools_json).context("the generated tools/list is JSON")?;
    let pretty = serde_json::to_string_pretty(&serde_json::json!({ "tools": tools }))?;
    Ok(pretty)
}

fn unknown_tier<'a>(wanted: &str, known: impl Iterator<Item = &'a str> + Clone) -> String {
    format!("no tier named `{wanted}`; {}", toolgate_policy::did_you_mean(wanted, known))
}

/// `explain` for a prompt, a resource (by name or URI) or a template (by name or URI template).
fn explain_prompt_resource(name: &str, checked: &toolgate_catalogue::Checked) -> Option<String> {
    let model = &checked.tools.model;
    let policy_model = &checked.policy.model;
    let mut out = String::new();
    let (securable, operation) = if let Some(p) = model.prompts.iter().find(|p| p.name == name) {
        let _ = writeln!(out, "{} — {} (prompt)\n  {}", p.name, p.title, p.description);
        for a in &p.arguments {
            let kind = serde_json::to_string(&a.schema).unwrap_or_default();
            let needed = if a.required { "required" } else { "optional" };
            let _ = writeln!(out, "  argument    {} ({needed}) {kind}: {}", a.name, a.description);
        }
        let tools: Vec<&str> = p
            .messages
            .iter()
            .filter_map(|m| match &m.content {
                toolgate_domain::prompts_resources::PromptContent::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .flat_map(toolgate_domain::prompts_resources::placeholders)
            .filter_map(|inner| match toolgate_domain::prompts_resources::Placeholder::parse(inner) {
                toolgate_domain::prompts_resources::Placeholder::Tool(tool) => Some(tool),
                _ => None,
            })
            .collect();
        let _ = writeln!(out, "  leads to    {}", tools.join(", "));
        (p.securable.clone(), p.operation.clone())
    } else if let Some(r) = model.resources.iter().find(|r| r.name == name || r.uri == name) {
        let _ = writeln!(out, "{} — {} (resource {}, {})\n  {}", r.name, r.title, r.uri, r.mime_type, r.description);
        (r.securable.clone(), r.operation.clone())
    } else {
        let index = model.resource_templates.iter().position(|t| t.name == name || t.uri_template == name)?;
        let (t, plan) = (&model.resource_templates[index], &checked.prompts_resources.templates[index]);
        let _ = writeln!(
            out,
            "{} — {} (resource template {}, {})\n  {}",
            t.name, t.title, t.uri_template, t.mime_type, t.description
        );
        if let Some(tool) = &t.tool {
            let _ = writeln!(out, "  read by     {tool} (its gate and handler; the pair below is the tool's)");
        }
        (plan.securable.clone(), plan.operation.clone())
    };
    let _ = writeln!(out, "  permission  {securable}:{operation}");
    tiers_and_roles(&mut out, policy_model, &securable, &operation);
    Some(out)
}

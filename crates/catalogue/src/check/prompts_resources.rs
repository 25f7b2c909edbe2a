//! Rule 12: prompts, resources and resource templates. Each is gated by a read-class pair that
//! no tier makes wait for a person; a prompt's placeholders name its own arguments and real
//! tools, and every argument is used; a template read through a tool maps its variables onto
//! that tool's arguments; a resource says what it returns exactly once.

use std::collections::HashMap;

use base64::Engine as _;
use serde_json::{Map, Value};
use toolgate_domain::prompts_resources::{
    BuiltinResource, Placeholder, PromptContent, PromptSpec, ResourceSpec, TemplateSpec, placeholders,
};

use super::Inputs;
use super::names::valid_name;
use crate::diag::{Diagnostic, did_you_mean};
use crate::model::OperationClass;
use crate::policy::{self, Decision};

/// The pair and decisions of each prompt, resource and template, in catalogue order.
#[derive(Clone, Debug, Default)]
pub struct PromptResourcePlans {
    pub prompts: Vec<PairPlan>,
    pub resources: Vec<PairPlan>,
    pub templates: Vec<PairPlan>,
}

#[derive(Clone, Debug)]
pub struct PairPlan {
    pub securable: String,
    pub operation: String,
    pub decisions: Vec<Decision>,
}

struct Checker<'a> {
    inputs: &'a Inputs<'a>,
    out: Vec<Diagnostic>,
}

impl Checker<'_> {
    /// An error about the entry at `pointer` (`/prompts/3/...`), named by its kind and name.
    fn error(&mut self, pointer: &str, subject: &str, message: impl Into<String>) -> &mut Diagnostic {
        let pos = self.inputs.tools.map.key(pointer);
        let kind = match pointer.split('/').nth(1) {
            Some("prompts") => "prompt",
            Some("resources") => "resource",
            _ => "resource template",
        };
        let message = format!("{kind} `{subject}`: {}", message.into());
        self.out.push(Diagnostic::error(&self.inputs.tools.file.name, pos, message));
        self.out.last_mut().expect("just pushed")
    }

    /// The pair's plan; errors when it is unknown, not read-class, or waits for a person.
    fn pair(&mut self, pointer: &str, subject: &str, securable: &str, operation: &str) -> PairPlan {
        let policy = &self.inputs.policy.model;
        if !policy.securables.iter().any(|s| s == securable) {
            let help = did_you_mean(securable, policy.securables.iter().map(String::as_str));
            self.error(&format!("{pointer}/securable"), subject, format!("unknown securable `{securable}`")).help =
                Some(help);
        }
        match self.inputs.class_of(operation) {
            None => {
                let help = did_you_mean(operation, policy.operations.keys().map(String::as_str));
                self.error(&format!("{pointer}/operation"), subject, format!("unknown operation `{operation}`")).help =
                    Some(help);
            }
            Some(class) if class != OperationClass::Read => {
                self.error(
                    &format!("{pointer}/operation"),
                    subject,
                    format!("`{operation}` is {class:?}-class: prompts and resources only read"),
                )
                .help = Some("use the read pair of the tools it shows (e.g. `Inventory:Read`)".into());
            }
            Some(_) => {}
        }
        let mut decisions = Vec::new();
        for tier in &policy.tiers {
            let verdict = policy::decide(policy, &tier.name, securable, operation);
            if matches!(verdict.decision, Decision::ApprovalRequired | Decision::ConfirmRequired) {
                self.error(
                    pointer,
                    subject,
                    format!("tier `{}` makes {securable}:{operation} wait for a person; a read of a prompt or resource cannot", tier.name),
                )
                .help = Some("gate it by a pair every tier that allows it allows outright".into());
            }
            decisions.push(if verdict.decision == Decision::Deny { Decision::Deny } else { Decision::Allow });
        }
        PairPlan { securable: securable.to_string(), operation: operation.to_string(), decisions }
    }

    fn unique<'n>(&mut self, kind: &str, field: &str, names: impl Iterator<Item = &'n str>) {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, name) in names.enumerate() {
            if let Some(first) = seen.insert(name, i) {
                self.error(
                    &format!("/{kind}/{i}/{field}"),
                    name,
                    format!("{field} `{name}` is also {kind} entry {first}'s"),
                );
            }
        }
    }
}

pub fn check(inputs: &Inputs) -> (Vec<Diagnostic>, PromptResourcePlans) {
    let model = &inputs.tools.model;
    let mut c = Checker { inputs, out: Vec::new() };
    c.unique("prompts", "name", model.prompts.iter().map(|p| p.name.as_str()));
    c.unique("resources", "uri", model.resources.iter().map(|r| r.uri.as_str()));
    c.unique("resourceTemplates", "name", model.resource_templates.iter().map(|t| t.name.as_str()));
    let prompts = model.prompts.iter().enumerate().map(|(i, p)| prompt(&mut c, i, p)).collect();
    let resources = model.resources.iter().enumerate().map(|(i, r)| resource(&mut c, i, r)).collect();
    let templates = model.resource_templates.iter().enumerate().map(|(i, t)| template(&mut c, i, t)).collect();
    (c.out, PromptResourcePlans { prompts, resources, templates })
}

fn prompt(c: &mut Checker, i: usize, p: &PromptSpec) -> PairPlan {
    let at = format!("/prompts/{i}");
    let subject = p.name.as_str();
    // Rule 13 on the schemas a prompt serves: its arguments' and its question's form.
    let schemas = p
        .arguments
        .iter()
        .enumerate()
        .map(|(k, a)| (format!("{at}/arguments/{k}/schema"), &a.schema))
        .chain(p.ask.iter().map(|q| (format!("{at}/ask/requestedSchema"), &q.requested_schema)));
    for (pointer, schema) in schemas.collect::<Vec<_>>() {
        for problem in super::keywords::scan(schema) {
            c.error(&format!("{pointer}{}", problem.pointer), subject, problem.message).help = Some(problem.help);
        }
    }
    if !valid_name(&p.name) {
        c.error(
            &format!("{at}/name"),
            subject,
            format!("prompt name {:?} is not 1-128 characters of A-Z a-z 0-9 _ . -", p.name),
        );
    }
    if p.messages.is_empty() {
        c.error(&at, subject, "a prompt needs at least one message");
    }
    let tools: Vec<&str> = c.inputs.tools.model.tools.iter().map(|t| t.name.as_str()).collect();
    let arguments: Vec<&str> = p.arguments.iter().map(|a| a.name.as_str()).collect();
    let mut used = vec![false; arguments.len()];
    for (m, message) in p.messages.iter().enumerate() {
        let (text, pointer) = match &message.content {
            PromptContent::Text { text } => (text.as_str(), format!("{at}/messages/{m}/content/text")),
            PromptContent::Resource { uri } => (uri.as_str(), format!("{at}/messages/{m}/content/uri")),
            PromptContent::Image { data, .. } => {
                if base64::engine::general_purpose::STANDARD.decode(data).is_err() {
                    c.error(&format!("{at}/messages/{m}/content/data"), subject, "image data is not base64");
                }
                continue;
            }
        };
        for inner in placeholders(text) {
            match Placeholder::parse(inner) {
                Placeholder::Argument(name) => match arguments.iter().position(|a| *a == name) {
                    Some(k) => used[k] = true,
                    None => {
                        let help = did_you_mean(name, arguments.iter().copied());
                        c.error(&pointer, subject, format!("`{{{{{name}}}}}` names no argument of {subject}")).help =
                            Some(help);
                    }
                },
                Placeholder::Tool(name) if !tools.contains(&name) => {
                    let help = did_you_mean(name, tools.iter().copied());
                    c.error(&pointer, subject, format!("`{{{{tool:{name}}}}}` names no tool in the catalogue")).help =
                        Some(help);
                }
                Placeholder::Tool(_) => {}
                Placeholder::Answer(field) => {
                    let fields =
                        p.ask.as_ref().and_then(|q| q.requested_schema.get("properties")).and_then(Value::as_object);
                    if !fields.is_some_and(|f| f.contains_key(field)) {
                        c.error(
                            &pointer,
                            subject,
                            format!("`{{{{answer:{field}}}}}` names no field of the prompt's `ask` form"),
                        );
                    }
                }
            }
        }
    }
    for (k, argument) in p.arguments.iter().enumerate() {
        let pointer = format!("{at}/arguments/{k}");
        if !used[k] {
            c.error(&pointer, subject, format!("argument `{}` is used by no message", argument.name)).help =
                Some(format!("write `{{{{{}}}}}` where its value belongs, or remove it", argument.name));
        }
        argument_schema(c, &format!("{pointer}/schema"), subject, &argument.schema);
    }
    c.pair(&at, subject, &p.securable, &p.operation)
}

/// `type: string` or `integer`; a closed enum of strings carries its safe default.
fn argument_schema(c: &mut Checker, pointer: &str, subject: &str, schema: &Map<String, Value>) {
    match schema.get("type").and_then(Value::as_str) {
        Some("string" | "integer") => {}
        other => {
            c.error(
                pointer,
                subject,
                format!("an argument's schema has `type: string` or `type: integer`, not {other:?}"),
            );
            return;
        }
    }
    // What prompts/get checks; any other keyword would be a promise nobody keeps.
    const CHECKED: [&str; 8] =
        ["type", "enum", "default", "maxLength", "minLength", "minimum", "maximum", "description"];
    for key in schema.keys().filter(|k| !CHECKED.contains(&k.as_str())) {
        c.error(pointer, subject, format!("`{key}` is not checked on prompt arguments")).help =
            Some(format!("use only {}", CHECKED.join(", ")));
    }
    if let Some(values) = schema.get("enum") {
        let strings: Option<Vec<&str>> = values.as_array().map(|a| a.iter().filter_map(Value::as_str).collect());
        let count = values.as_array().map_or(0, Vec::len);
        match strings {
            Some(s) if !s.is_empty() && s.len() == count => {
                let default = schema.get("default").and_then(Value::as_str);
                if !default.is_some_and(|d| s.contains(&d)) {
                    c.error(
                        pointer,
                        subject,
                        "a closed enum needs a `default` among its values: unknown input is normalised to it",
                    )
                    .help = Some(format!("add `default: {}` (the safest value)", s[0]));
                }
            }
            _ => {
                c.error(pointer, subject, "`enum` must be a non-empty list of strings");
            }
        }
    }
}

fn resource(c: &mut Checker, i: usize, r: &ResourceSpec) -> PairPlan {
    let at = format!("/resources/{i}");
    let subject = r.name.as_str();
    let sources = [r.text.is_some(), r.blob.is_some(), r.builtin.is_some()].iter().filter(|s| **s).count();
    if sources != 1 {
        c.error(&at, subject, format!("a resource has exactly one of `text`, `blob` and `builtin` ({sources} here)"));
    }
    if r.builtin == Some(BuiltinResource::ToolDocumentation) {
        c.error(
            &format!("{at}/builtin"),
            subject,
            "`tool_documentation` needs a `{tool}` variable: declare it as a resource template",
        );
    }
    if let Some(blob) = &r.blob
        && base64::engine::general_purpose::STANDARD.decode(blob).is_err()
    {
        c.error(&format!("{at}/blob"), subject, "`blob` is not base64");
    }
    if !r.uri.contains("://") {
        c.error(&format!("{at}/uri"), subject, format!("`{}` is not an absolute URI (scheme://...)", r.uri));
    }
    c.pair(&at, subject, &r.securable, &r.operation)
}

fn template(c: &mut Checker, i: usize, t: &TemplateSpec) -> PairPlan {
    let at = format!("/resourceTemplates/{i}");
    let subject = t.name.as_str();
    let variables = t.variables();
    if variables.is_empty() || variables.iter().any(|v| !valid_name(v)) {
        c.error(
            &format!("{at}/uriTemplate"),
            subject,
            format!("`{}` needs `{{name}}` variables of A-Z a-z 0-9 _", t.uri_template),
        );
    }
    for key in t.complete.keys() {
        if !variables.contains(&key.as_str()) {
            c.error(
                &format!("{at}/complete"),
                subject,
                format!("`complete` names `{key}`, which is no variable of the template"),
            );
        }
    }
    let sources = [t.tool.is_some(), t.text.is_some(), t.builtin.is_some()].iter().filter(|s| **s).count();
    if sources != 1 {
        c.error(&at, subject, format!("a template has exactly one of `tool`, `text` and `builtin` ({sources} here)"));
    }
    let Some(tool_name) = &t.tool else {
        if t.builtin == Some(BuiltinResource::ToolDocumentation) && variables != ["tool"] {
            c.error(&format!("{at}/uriTemplate"), subject, "`tool_documentation` takes exactly one variable, `{tool}`");
        }
        let (Some(securable), Some(operation)) = (&t.securable, &t.operation) else {
            c.error(&at, subject, "a template not read through a tool needs `securable` and `operation`");
            return PairPlan { securable: String::new(), operation: String::new(), decisions: deny_all(c) };
        };
        return c.pair(&at, subject, securable, operation);
    };
    if t.securable.is_some() || t.operation.is_some() {
        c.error(
            &at,
            subject,
            "a template read through a tool takes the tool's pair: remove `securable` and `operation`",
        );
    }
    let tools = &c.inputs.tools.model.tools;
    let Some(tool) = tools.iter().find(|x| &x.name == tool_name) else {
        let help = did_you_mean(tool_name, tools.iter().map(|x| x.name.as_str()));
        c.error(&format!("{at}/tool"), subject, format!("no tool `{tool_name}`")).help = Some(help);
        return PairPlan { securable: String::new(), operation: String::new(), decisions: deny_all(c) };
    };
    let properties = tool.input_schema.get("properties").and_then(Value::as_object);
    for v in &variables {
        if !properties.is_some_and(|p| p.contains_key(*v)) {
            c.error(&format!("{at}/uriTemplate"), subject, format!("`{{{v}}}` is no argument of {tool_name}"));
        }
    }
    let required = tool.input_schema.get("required").and_then(Value::as_array);
    for r in required.into_iter().flatten().filter_map(Value::as_str) {
        if !variables.contains(&r) {
            c.error(
                &format!("{at}/uriTemplate"),
                subject,
                format!("{tool_name} requires `{r}`: the template needs `{{{r}}}`"),
            );
        }
    }
    let (securable, operation) = (tool.securable.clone(), tool.operation.clone());
    c.pair(&format!("{at}/tool"), subject, &securable, &operation)
}

fn deny_all(c: &Checker) -> Vec<Decision> {
    vec![Decision::Deny; c.inputs.policy.model.tiers.len()]
}
